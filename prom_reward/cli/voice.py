"""What every subcommand shares: errors as one line ``prom-reward: error: <what> ...; fix: <how>`` naming flags
(``CliParser``, ``user_terms``), and the flags of the judge (one per ``JudgeSpec`` field), store and outage policy.

Example:
    >>> p = argparse.ArgumentParser(); add_judge_options(p)
    >>> judge_spec(p.parse_args(["--server", "http://127.0.0.1:8000/v1"])).kwargs()["backend"]
    'openai'
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import typing
from collections.abc import Collection, Iterator
from typing import Any, NoReturn

from prom_reward.backends.factory import IN_PROCESS
from prom_reward.core.judge_spec import RENAMED, JudgeSpec
from prom_reward.declared import add_settings, declared, given_settings
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.format.judge_format import JUDGE_FORMATS, get_judge_format
from prom_reward.integrations.settings import OUTAGE_PREFIX, flag_name
from prom_reward.rewards.outage import OutagePolicy

PROG = "prom-reward"
FIX = "; fix: "
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`")  # :class:`~prom_reward.RewardConfig`
_LITERAL = re.compile(r"``(.+?)``")  # ``"raise"``


def plain(text: str) -> str:
    """``text`` (a help text, often a docstring) without reST markup: ``x`` and :role:`x` are x."""
    text = _ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    return _LITERAL.sub(lambda m: m[1], text)


class PlainHelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, with every description and help text shown ``plain``."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


class PlainDescriptionFormatter(PlainHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``PlainHelpFormatter`` keeping the description's own line breaks (a module docstring's)."""


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` (and its subparsers) whose usage errors read like every other error of the command
    line, naming the command (a module's parser by its last name, ``demo``), and whose help is ``plain``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", PlainHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(PROG).strip() if self.prog.startswith(PROG) else self.prog.rsplit(".", 1)[-1]
        print_error(with_fix(f"{command}: {message}" if command else message, self.prog))
        self.exit(2)


def user_terms(parser: argparse.ArgumentParser) -> dict[str, str]:
    """How the command says each setting: its option's dest -> its long flag (``num_samples`` -> ``--num-samples``),
    the judge keywords ``JudgeSpec`` renames (``base_url`` -> ``--server``), None -> ``null``."""
    out = {"None": "null"}
    for action in parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if long and action.dest not in out:
            out[action.dest] = long[0]
    out.update((python, out[dest]) for python, dest in RENAMED.items() if dest in out and python not in out)
    return out


def with_fix(message: str, prog: str) -> str:
    """``message``, with ``fix: see PROG --help`` where it has no fix of its own."""
    return message if FIX in message else f"{message}{FIX}see {prog} --help"


def print_error(message: str) -> None:
    """Write ``message`` as the one error line of the command on stderr: ``prom-reward: error: <message>``."""
    print(f"{PROG}: error: " + " ".join(message.split()), file=sys.stderr)


@contextlib.contextmanager
def fds_to(fd: int, *fds: int) -> Iterator[None]:
    """While inside, the file descriptors ``fds`` (1: stdout, 2: stderr) are copies of ``fd``: what this process
    and the processes it starts (engines, Ray) print there goes to ``fd``; each is restored on the way out."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(f) for f in fds]
    for f in fds:
        os.dup2(fd, f)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for f, copy in zip(fds, saved, strict=True):
            os.dup2(copy, f)
            os.close(copy)


# -- the flags of the judge, the store and the outage policy ---------------------------------
def judge_format_name(value: str) -> str:
    """``--format``'s value: a registered judge format's name, or a YAML format file's path, checked here."""
    try:
        fmt = get_judge_format(value)
    except PromRewardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return fmt.name if fmt.name in JUDGE_FORMATS else value  # a file is loaded again (once) where the judge is built


def add_judge_options(g: argparse.ArgumentParser, *, truncate: bool = True) -> None:
    """The flag of each ``JudgeSpec`` field (``max_tokens`` -> ``--max-tokens``), read back by ``judge_spec``;
    ``truncate``: with ``--truncate`` (reward-server has the ``over_context`` setting instead)."""
    for d in declared(JudgeSpec):
        if d.name == "truncate" and not truncate:
            continue
        options: dict[str, Any] = {"help": d.rules.help.replace("%", "%%"), "default": d.default}
        if d.name == "server":
            options.update(action="append", default=None)
        elif d.kind is bool:
            options["action"] = "store_true"
        elif d.kind == bool | None:
            options["action"] = argparse.BooleanOptionalAction
        else:
            base = next(a for a in typing.get_args(d.kind) or (d.kind,) if a is not type(None))
            choices = IN_PROCESS if d.name == "backend" else tuple(c for c in d.rules.choices if c is not None)
            options.update(type=judge_format_name if d.name == "format" else base, choices=choices or None)
        g.add_argument(flag_name(d.name), **options)


def add_store_options(g: argparse.ArgumentParser) -> None:
    """``--store`` and ``--store-timeout`` of every command that judges a file (the jobs, the probe)."""
    g.add_argument(
        "--store", help="SQLite judgment store: saves every judge result; a re-run recomputes nothing stored"
    )
    g.add_argument(
        "--store-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for a --store that another process holds locked (default 30)",
    )


def open_store(args: argparse.Namespace) -> dict[str, Any]:
    """``{"store": JudgmentStore}`` of ``--store``, opened (checked) before any input is read; ``{}`` without."""
    if not args.store:
        return {}
    from prom_reward.backends.store import JudgmentStore

    return {"store": JudgmentStore(args.store, timeout=args.store_timeout)}


def judge_spec(args: argparse.Namespace, base: JudgeSpec | None = None, names: Collection[str] = ()) -> JudgeSpec:
    """The ``JudgeSpec`` of the judge flags given (``names``: those read, default every one) and the store options,
    over ``base`` (default: the declared defaults); a bad value names its flag."""
    base = base or JudgeSpec()
    values = {d.name: getattr(base, d.name) for d in declared(JudgeSpec)}
    values.update((name, v) for name in names or list(values) if (v := getattr(args, name, None)) is not None)
    values["server"] = tuple(values["server"])
    if values["server"] and values["wire"] is None:
        values["wire"] = "chat"
    options = {**base.options, **(open_store(args) if hasattr(args, "store") else {})}
    try:
        return JudgeSpec(**values, api_key=base.api_key, options=options)
    except ConfigError as e:
        raise e.said_as(flag_name(e.setting)) from None


def add_outage_options(g: argparse.ArgumentParser, default: OutagePolicy, fail_means: str) -> None:
    """The flag of each ``OutagePolicy`` setting (``--outage-budget-s`` ...) over ``default``; ``fail_means``: what
    ``--outage-on-exhausted fail`` does in this command."""
    add_settings(g, type(default), prefix=OUTAGE_PREFIX, defaults=default, note=f"here fail {fail_means}")


def outage_policy(args: argparse.Namespace, default: OutagePolicy) -> OutagePolicy:
    """The ``OutagePolicy`` of the ``--outage-*`` flags given, over ``default``; a bad value names its flag."""
    try:
        return dataclasses.replace(default, **given_settings(args, type(default), prefix=OUTAGE_PREFIX))
    except ConfigError as e:
        name = e.setting if e.setting.startswith(OUTAGE_PREFIX) else OUTAGE_PREFIX + e.setting
        raise e.said_as(flag_name(name)) from None
