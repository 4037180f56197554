"""The Prometheus judge prompt templates (from the packaged ``assets/templates.json``): filling in one pass,
checking custom templates, parsing filled prompts back, and ``unicode_problem``."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Formatter

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.parsing import Task

_ASSET = resources.files("prom_reward").joinpath("assets").joinpath("templates.json")
TEMPLATES: dict[str, str] = json.loads(_ASSET.read_text(encoding="utf-8"))
"""Every string of ``assets/templates.json`` by its key."""

ABSOLUTE_PROMPT: str = TEMPLATES["ABSOLUTE_PROMPT"]
ABSOLUTE_PROMPT_WO_REF: str = TEMPLATES["ABSOLUTE_PROMPT_WO_REF"]
RELATIVE_PROMPT: str = TEMPLATES["RELATIVE_PROMPT"]
RELATIVE_PROMPT_WO_REF: str = TEMPLATES["RELATIVE_PROMPT_WO_REF"]
ABS_SYSTEM_PROMPT: str = TEMPLATES["ABS_SYSTEM_PROMPT"]
REL_SYSTEM_PROMPT: str = TEMPLATES["REL_SYSTEM_PROMPT"]
SCORE_RUBRIC_TEMPLATE: str = TEMPLATES["SCORE_RUBRIC_TEMPLATE"]
HELPFULNESS_RUBRIC: str = TEMPLATES["HELPFULNESS_RUBRIC"]
HARMLESSNESS_RUBRIC: str = TEMPLATES["HARMLESSNESS_RUBRIC"]
HONESTY_RUBRIC: str = TEMPLATES["HONESTY_RUBRIC"]
FACTUAL_VALIDITY_RUBRIC: str = TEMPLATES["FACTUAL_VALIDITY_RUBRIC"]
REASONING_RUBRIC: str = TEMPLATES["REASONING_RUBRIC"]

BUILTIN = {
    ("absolute", True): ABSOLUTE_PROMPT,
    ("absolute", False): ABSOLUTE_PROMPT_WO_REF,
    ("relative", True): RELATIVE_PROMPT,
    ("relative", False): RELATIVE_PROMPT_WO_REF,
}
_BASE_FIELDS = {"absolute": ("instruction", "response"), "relative": ("instruction", "response_A", "response_B")}


@dataclass(frozen=True)
class AbsolutePromptParts:
    """The user-supplied pieces of a filled absolute prompt (``reference_answer`` None: the without-reference form;
    ``rubric``: the rubric section as it appears)."""

    instruction: str
    response: str
    reference_answer: str | None
    rubric: str


@dataclass(frozen=True)
class RelativePromptParts:
    """The user-supplied pieces of a filled pairwise prompt (as ``AbsolutePromptParts``)."""

    instruction: str
    response_a: str
    response_b: str
    reference_answer: str | None
    rubric: str


@lru_cache(maxsize=128)
def _pieces(template: str) -> tuple[tuple[str, str | None], ...]:
    """``(literal, field-or-None)`` pairs of ``template``; raises ConfigError on bad syntax."""
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as e:
        raise ConfigError(
            f"template is not valid str.format syntax ({e}); write literal braces as '{{{{' and '}}}}'"
        ) from e
    for _, name, spec, conversion in parsed:
        if name is not None and (spec or conversion):
            extra = ("!" + conversion if conversion else "") + (":" + spec if spec else "")
            raise ConfigError(
                f"template field {{{name}{extra}}} has a conversion or format spec; write it as plain {{{name}}}"
            )
    return tuple((lit, name) for lit, name, _, _ in parsed)


def template_fields(template: str) -> set[str]:
    """The field names a ``str.format``-style template uses."""
    if not isinstance(template, str):
        raise ConfigError(f"a template must be a str, got {type(template).__name__}")
    return {name for _, name in _pieces(template) if name is not None}


def validate_template(template: str, kind: Task, with_reference: bool) -> None:
    """Raise ConfigError unless ``template`` uses exactly the fields of ``kind`` (``{reference_answer}`` too when
    ``with_reference``)."""
    allowed = _BASE_FIELDS[kind] + (("reference_answer",) if with_reference else ()) + ("rubric",)
    fields = template_fields(template)
    problems = []
    for name in sorted(fields - set(allowed)):
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f" (did you mean {{{close[0]}}}?)" if close else ""
        if name == "reference_answer":
            hint = " (a template without reference must not use it; never render a missing reference)"
        problems.append(f"unknown field {{{name}}}{hint}")
    problems += [f"missing field {{{name}}}" for name in allowed if name not in fields]
    if problems:
        ref = "with" if with_reference else "without"
        names = ", ".join(f"{{{n}}}" for n in allowed)
        raise ConfigError(f"invalid {kind} template ({ref} reference): {'; '.join(problems)}. Allowed fields: {names}")


def fill(template: str, values: dict[str, str]) -> str:
    """One-pass substitution: each slot gets its value verbatim; values are never re-scanned."""
    return "".join([lit + (values[name] if name is not None else "") for lit, name in _pieces(template)])


def need_str(value: object, field: str) -> str:
    """``value`` when it is a str; else ``InputError`` naming ``field``."""
    if not isinstance(value, str):
        raise InputError(f"{field} must be a str, got {type(value).__name__}", field=field)
    return value


def _readings(filled: str, template: str, limit: int = 10_000) -> list[dict[str, str]]:
    """The ways ``filled`` reads as ``template`` (stops after two: one is unique, two is ambiguous)."""
    pieces = _pieces(template)
    lits = [lit for lit, _ in pieces]
    names = [name for _, name in pieces if name is not None]
    head, seps, tail = lits[0], lits[1:-1], lits[-1]
    end = len(filled) - len(tail)
    if not (filled.startswith(head) and filled.endswith(tail) and end >= len(head)):
        return []
    found: list[dict[str, str]] = []
    steps = [0]

    def walk(i: int, pos: int, values: list[str]) -> None:
        if i == len(seps):
            found.append(dict(zip(names, values + [filled[pos:end]], strict=True)))
            return
        at = filled.find(seps[i], pos, end)
        while at >= 0 and len(found) < 2:
            steps[0] += 1
            if steps[0] > limit:
                raise InputError(
                    "prompt is ambiguous: template section headers occur too often inside its "
                    "fields to split it reliably",
                    field="prompt",
                )
            walk(i + 1, at + len(seps[i]), values + [filled[pos:at]])
            at = filled.find(seps[i], at + 1, end)

    walk(0, len(head), [])
    return found


def _parse(filled: str, kind: Task) -> dict[str, str]:
    need_str(filled, "prompt")
    candidates = [BUILTIN[(kind, True)], BUILTIN[(kind, False)]]
    for tmpl in candidates:
        readings = _readings(filled, tmpl)
        if len(readings) > 1:
            raise InputError(
                f"{kind} prompt is ambiguous: a field contains one of the template's section "
                "headers, so the text splits more than one way",
                field="prompt",
            )
        if readings and fill(tmpl, readings[0]) == filled:  # re-rendering must reproduce the input
            return readings[0]
    names = " or ".join(n for n, t in TEMPLATES.items() if t in candidates)
    raise InputError(
        f"text is not a filled {kind} prompt: it does not match {names} (check the header text and "
        f"the '###Feedback: ' ending); got {filled[:60]!r}...",
        field="prompt",
    )


def parse_absolute_prompt(filled: str) -> AbsolutePromptParts:
    """A filled absolute prompt split back into its parts (InputError: not one, or ambiguous).

    >>> from prom_reward.format.render import render_absolute
    >>> parse_absolute_prompt(render_absolute("q", "r {x}", "reasoning", "ref")).response
    'r {x}'
    """
    v = _parse(filled, "absolute")
    return AbsolutePromptParts(v["instruction"], v["response"], v.get("reference_answer"), v["rubric"])


def parse_relative_prompt(filled: str) -> RelativePromptParts:
    """A filled pairwise prompt split back into its parts (the inverse of ``render_relative``)."""
    v = _parse(filled, "relative")
    return RelativePromptParts(
        v["instruction"], v["response_A"], v["response_B"], v.get("reference_answer"), v["rubric"]
    )


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be sent or written as UTF-8 (a lone surrogate); None when it is valid Unicode text.

    >>> unicode_problem("fine"), unicode_problem("bad \\ud800")
    (None, "holds a lone surrogate ('\\\\ud800' at character 4), which is not valid Unicode text")
    """
    try:
        text.isascii() or text.encode("utf-8")  # (ASCII holds no surrogate: no copy to make)
    except UnicodeEncodeError as e:
        return f"holds a lone surrogate ({text[e.start]!r} at character {e.start}), which is not valid Unicode text"
    return None
