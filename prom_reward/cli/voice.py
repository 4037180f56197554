"""How every error of the command line reads: ``prom-reward: error: <what> ...; fix: <how>``, one line, in
the user's terms: an error about a setting names it by its flag (``user_terms``: a ``ConfigError``'s
``setting`` and ``mentions``, declared where it is raised), argparse's own errors through ``CliParser.error``.

Example:
    >>> error_line("prom-reward: error: store: no output; fix: give -o")
    'prom-reward: error: store: no output; fix: give -o'
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

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
    """An ``ArgumentParser`` whose usage errors read like every other error of the command line:
    ``prom-reward: error: grade: argument --strategy: invalid choice ...; fix: see prom-reward grade --help``.
    Its subparsers are of the same class (argparse makes them with the parent's class); a module's parser
    (``python -m prom_reward.cli.demo``) is named by the module's last name (``demo``). Its help is
    ``plain`` (``PlainHelpFormatter`` unless another is given)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", PlainHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if self.prog.startswith(PROG):
            command = self.prog.removeprefix(PROG).strip()
        else:
            command = self.prog.rsplit(".", 1)[-1]
        where = f"{command}: " if command else ""
        hint = "" if FIX in message else f"{FIX}see {self.prog} --help"
        self.exit(2, error_line(f"{where}{message}{hint}") + "\n")


RENAMED = {"base_url": "server", "expected_score": "expected", "truncate_response": "truncate"}
"""The ``PrometheusJudge`` keywords whose option has another dest (``judge_options.judge_kwargs`` renames them)."""


def user_terms(parser: argparse.ArgumentParser) -> dict[str, str]:
    """How the command says each setting: its option's dest -> its long flag (``num_samples`` -> ``--num-samples``),
    the judge keywords of ``RENAMED`` -> their option's flag (``base_url`` -> ``--server``), None -> ``null``."""
    out = {"None": "null"}
    for action in parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if long and action.dest not in out:
            out[action.dest] = long[0]
    out.update((python, out[dest]) for python, dest in RENAMED.items() if dest in out and python not in out)
    return out


_PREFIXES = re.compile(rf"^(?:{PROG}(?: [\w-]+)?: )?(?:error: )?")


def error_line(message: str) -> str:
    """``prom-reward: error: <message>`` on one line, whatever prefix ``message`` already had."""
    return f"{PROG}: error: " + _PREFIXES.sub("", " ".join(message.split()), count=1)


def print_error(message: str) -> None:
    """Write ``message`` as the one error line of the command on stderr."""
    print(error_line(message), file=sys.stderr)
