"""How every error of the command line reads: ``prom-reward: error: <what> ...; fix: <how>``, one line, in
the user's terms.

The library's messages name what a Python caller gave (``num_samples``, ``--response-col (response_column=)``);
a ``ConfigError`` about a setting names it in ``setting``, which the command says as its flag
(``cli.main.explain``). The other messages are said with the flags here, from the dests of the subcommand's
parser: a leading setting name becomes its flag
(``num_samples: expected ...`` -> ``--num-samples: expected ...``), ``name=value`` becomes ``--flag value``,
a ``(name=)`` beside its flag goes, ``or None`` (not giving the flag) is dropped and any other None is
JSON's null. A message of the
form ``... expected X, got Y`` without a fix gets ``fix: give --flag X``. argparse's own errors (an
unknown flag, a bad choice, a missing argument) take the same shape through ``CliParser.error``.

Example:
    >>> in_user_terms("temperature: expected a number >= 0, got -1.0", {"temperature": "--temperature"})
    '--temperature: expected a number >= 0, got -1.0; fix: give --temperature a number >= 0'
    >>> in_user_terms("column 'r' missing; fix: name it with --response-col (response_column=)",
    ...               {"response_column": "--response-col"})
    "column 'r' missing; fix: name it with --response-col"
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


def flags_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's dest -> its long flag (``num_samples`` -> ``--num-samples``), and the judge keywords
    of ``RENAMED`` -> their option's flag (``base_url`` -> ``--server``)."""
    out: dict[str, str] = {}
    for action in parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if long and action.dest not in out:
            out[action.dest] = long[0]
    out.update((python, out[dest]) for python, dest in RENAMED.items() if dest in out and python not in out)
    return out


_BESIDE = re.compile(r" \((\w+)=\)")  # "--response-col (response_column=)"
_ASSIGN = re.compile(r"\b([a-z][a-z0-9_]*)=(?=[^\s=)])")  # "tensor_parallel_size=2"
_LEADING = re.compile(r"^([a-z][a-z0-9_]*)(?=:| must | ')")  # "num_samples: ...", "port must ..."
_NONE = re.compile(r"(expected [^;]*?),? or None(?=[,;)]| got)")
_EXPECTED = re.compile(r"^(--[\w-]+)\b[^;]*?(?:: expected| must be) (.+?), got ")


def in_user_terms(message: str, flags: dict[str, str]) -> str:
    """``message`` with the Python names of ``flags`` (dest -> flag) said as flags, and a fix where an
    ``expected X, got Y`` message has none (see the module docstring)."""
    text = " ".join(message.split())  # one line

    def beside(m: re.Match[str]) -> str:
        flag = flags.get(m.group(1))
        if flag is None:
            return m.group(0)
        return "" if flag in text else f" ({flag})"

    text = _BESIDE.sub(beside, text)
    text = _ASSIGN.sub(lambda m: f"{flags[m.group(1)]} " if m.group(1) in flags else m.group(0), text)
    leading = _LEADING.match(text)
    if leading and leading.group(1) in flags:  # "rubric: rubric: unknown ..." says its name once
        name = leading.group(1)
        rest = text[leading.end() :]
        text = flags[name] + (rest[len(name) + 2 :] if rest.startswith(f": {name}: ") else rest)
    text = _NONE.sub(r"\1", text)  # a flag left out is None
    text = re.sub(r"\bNone\b", "null", text)  # a value in a file
    if FIX.strip() not in text:
        expected = _EXPECTED.match(text)
        if expected:
            text += f"{FIX}give {expected.group(1)} {expected.group(2)}"
    return text


_PREFIXES = re.compile(rf"^(?:{PROG}(?: [\w-]+)?: )?(?:error: )?")


def error_line(message: str) -> str:
    """``prom-reward: error: <message>`` on one line, whatever prefix ``message`` already had."""
    return f"{PROG}: error: " + _PREFIXES.sub("", " ".join(message.split()), count=1)


def print_error(message: str) -> None:
    """Write ``message`` as the one error line of the command on stderr."""
    print(error_line(message), file=sys.stderr)
