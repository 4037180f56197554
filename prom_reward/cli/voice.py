"""How the command line speaks: every error as one line ``prom-reward: error: <what> ...; fix: <how>``, the
settings an error names said as their flags (``user_terms``), argparse's own errors too (``CliParser``); and the
one-file outputs (``-o``) of ``report`` and ``probe``, checked before anything runs and written whole."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from prom_reward.core.judge_spec import RENAMED
from prom_reward.errors import ConfigError

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
        if self.prog.startswith(PROG):
            command = self.prog.removeprefix(PROG).strip()
        else:
            command = self.prog.rsplit(".", 1)[-1]
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


def output_file(given: str, suffixes: tuple[str, ...], what: str) -> Path:
    """``-o given``: a file named ``*<suffixes[0]>`` (or another of ``suffixes``) in a folder that exists, else
    ``ConfigError`` (``what``: what the command writes, said when the name is wrong)."""
    out = Path(given)
    if out.suffix.lower() not in suffixes:
        raise ConfigError(f"-o {given}: {what}; fix: name a {suffixes[0]} file")
    if not out.parent.is_dir():
        raise ConfigError(f"-o {given}: folder {out.parent} does not exist; fix: create it or choose another -o")
    if out.is_dir():
        raise ConfigError(f"-o {given}: that is a folder; fix: name a {suffixes[0]} file")
    return out


def write_whole(out: Path, data: bytes) -> None:
    """Write ``data`` to ``out`` through a temporary file beside it (a full disk leaves neither half-written)."""
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
