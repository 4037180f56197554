"""A row's checklist: its criteria (strings or ``{criterion, weight, category, rubric}`` mappings; RaR's
categories) validated before any judging, and the rubric a criterion without its own is judged against."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, InputError, PromRewardError
from prom_reward.format.judge_format import JudgeFormat, unsupported_task
from prom_reward.format.rubrics import Rubric, get_rubric
from prom_reward.format.templates import unicode_problem

CATEGORIES = ("essential", "important", "optional", "pitfall")
"""RaR's criterion categories; a plain string criterion is ``important``."""
DEFAULT_CATEGORY = "important"
KEYS = ("criterion", "weight", "category", "rubric")

_LEVELS = {
    2: ("does not satisfy", "satisfies"),
    3: ("does not satisfy", "partly satisfies", "fully satisfies"),
    4: ("does not satisfy", "partly satisfies", "mostly satisfies", "fully satisfies"),
    5: ("does not satisfy", "barely satisfies", "partly satisfies", "mostly satisfies", "fully satisfies"),
}
_PITFALL = {
    2: ("avoids", "falls into"),
    3: ("clearly avoids", "partly falls into", "clearly falls into"),
    4: ("clearly avoids", "nearly falls into", "partly falls into", "clearly falls into"),
    5: ("clearly avoids", "mostly avoids", "partly falls into", "mostly falls into", "clearly falls into"),
}


@dataclass(frozen=True)
class Criterion:
    """One criterion of a checklist, validated on construction (a ``ConfigError`` naming the field)."""

    text: str = setting(help="What the response must satisfy (a pitfall's: what it must avoid).", nonempty=True)
    weight: float = setting(
        1.0, help="Its weight (a pitfall's counts against the response).", gt=0, unit="a finite number"
    )
    category: str = setting(DEFAULT_CATEGORY, help="Its category (RaR's).", choices=CATEGORIES)
    rubric: Rubric | None = None
    """Its own rubric; None: ``criterion_rubric``'s binary one."""

    def __post_init__(self) -> None:
        if isinstance(self.text, str):  # the text first, as a row's fields read
            empty = f"expected a non-empty string, got {self.text!r}"
            problem = unicode_problem(self.text) if self.text.strip() else empty
            if problem is not None:
                raise ConfigError(problem, "text")
        check(self)
        object.__setattr__(self, "weight", float(self.weight))

    @property
    def pitfall(self) -> bool:
        """True for a pitfall (its score counts against the response)."""
        return self.category == "pitfall"


_FIXES = {
    "criterion": "give the criterion as a non-empty string of valid Unicode text",
    "weight": "give a number > 0 (a pitfall's weight is positive too: its category makes it subtract)",
    "category": f"use one of {', '.join(CATEGORIES)}",
    "rubric": "give a rubric name, a Rubric or a dict of criteria and score descriptions, or leave it out",
}


def _fail(row: int | None, k: int, text: object, field: str, what: str) -> InputError:
    where = f"row {row}, " if row is not None else ""
    label = f" ({text[:60]!r})" if isinstance(text, str) and text.strip() else ""
    return InputError(f"{where}criterion {k}{label}: {field}: {what}; fix: {_FIXES[field]}", index=row, field=field)


def parse_criterion(entry: object, row: int | None, k: int) -> Criterion:
    """Entry ``k`` of row ``row``'s checklist as a ``Criterion`` (``InputError`` naming both, the field, the fix)."""
    if isinstance(entry, str):
        entry = {"criterion": entry}
    if not isinstance(entry, Mapping):
        what = f"expected a string or a mapping {{{', '.join(KEYS)}}}, got {type(entry).__name__}"
        raise _fail(row, k, None, "criterion", what)
    entry = {key: v for key, v in entry.items() if v is not None}  # a struct column's null: the key is absent
    unknown = sorted(str(key) for key in entry if key not in KEYS)
    text: Any = entry.get("criterion")  # checked by Criterion
    if unknown:
        raise _fail(row, k, text, "criterion", f"unknown key(s) {', '.join(unknown)} (valid: {', '.join(KEYS)})")
    try:
        criterion = Criterion(text, entry.get("weight", 1.0), entry.get("category", DEFAULT_CATEGORY))
    except ConfigError as e:
        field = "criterion" if e.setting == "text" else e.setting
        raise _fail(row, k, None if field == "criterion" else text, field, e.problem.split("; fix: ")[0]) from None
    rubric = entry.get("rubric")
    if rubric is not None:
        try:
            rubric = get_rubric(rubric)
        except PromRewardError as e:
            raise _fail(row, k, text, "rubric", str(e)) from None
    return dataclasses.replace(criterion, text=criterion.text.strip(), rubric=rubric)


def parse_checklist(value: object, row: int | None = None) -> tuple[Criterion, ...]:
    """A row's checklist (a list of criteria, or its JSON text: a CSV cell) validated; ``InputError`` names the row,
    the criterion, the field and the fix.

    >>> [(x.category, x.weight) for x in parse_checklist(["Cites", {"criterion": "Rude", "category": "pitfall"}])]
    [('important', 1.0), ('pitfall', 1.0)]
    """

    def fail(what: str, fix: str) -> InputError:
        where = f"row {row}: " if row is not None else ""
        return InputError(f"{where}checklist: {what}; fix: {fix}", index=row, field="checklist")

    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            what = f"a string starting with '[' must be a JSON list of criteria: {e}"
            raise fail(what, "write valid JSON or give the checklist as a list") from None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        what = f"expected a list of criteria (strings or {{{', '.join(KEYS)}}} mappings), got {type(value).__name__}"
        raise fail(what, "give the row's checklist as a list")
    if not value:
        raise fail(
            "expected at least one criterion, got an empty list", "add a criterion or leave the row's checklist out"
        )
    return tuple(parse_criterion(entry, row, k) for k, entry in enumerate(value))


def check_grading_format(fmt: JudgeFormat, column: str) -> None:
    """``ConfigError`` when ``fmt`` cannot grade a checklist's criteria (pairwise-only), naming the formats that can
    and the other way out, dropping the column."""
    if "absolute" not in fmt.tasks:
        raise ConfigError(
            f"column {column!r}: a checklist's criteria are graded one by one, and {unsupported_task(fmt, 'absolute')}"
            ", or drop the column"
        )


def criterion_rubric(criterion: Criterion, fmt: JudgeFormat) -> Rubric:
    """The rubric ``criterion`` is judged against: its own, else a satisfied/not rubric with one description per
    score of ``fmt``'s scale (2 to 5 points; ConfigError otherwise)."""
    if criterion.rubric is not None:
        return criterion.rubric
    n = len(fmt.scale)
    if n not in _LEVELS:
        raise ConfigError(
            f"judge format {fmt.name!r} has a {n}-point scale; a criterion without a rubric gets a binary rubric "
            "for 2 to 5 points; fix: give each criterion its own rubric, or use a format with such a scale"
        )
    if criterion.pitfall:
        question = f"Does the response fall into this pitfall: {criterion.text}?"
        return Rubric(question, tuple(f"The response {w} the pitfall." for w in _PITFALL[n]))
    question = f"Does the response satisfy this criterion: {criterion.text}?"
    return Rubric(question, tuple(f"The response {w} the criterion." for w in _LEVELS[n]))


def satisfied(unit_score: float) -> bool:
    """Whether a score, on [0, 1] (``unit_score``), satisfies its criterion: above the scale's middle."""
    return unit_score > 0.5


def checklist_rubric(criteria: Sequence[Criterion], fmt: JudgeFormat) -> Rubric:
    """Implicit mode's rubric: the whole checklist as one question, scored on ``fmt``'s scale."""
    n = len(fmt.scale)
    if n < 2 or n > 5:
        raise ConfigError(
            f"judge format {fmt.name!r} has a {n}-point scale; an implicit checklist rubric needs 2 to 5 points; "
            "fix: use explicit mode with rubrics per criterion, or a format with such a scale"
        )
    lines = []
    for k, c in enumerate(criteria, 1):
        kind = "must avoid" if c.pitfall else c.category
        lines.append(f"({k}) [{kind}, weight {c.weight:g}] {c.text}")
    question = "How well does the response satisfy this checklist? " + " ".join(lines)
    low = "The response misses an essential criterion or falls into a pitfall."
    top = "The response satisfies every criterion and avoids every pitfall."
    middle = {
        2: (),
        3: ("The response satisfies the essential criteria but misses others.",),
        4: ("The response satisfies some criteria and misses several.", "The response satisfies most criteria."),
        5: (
            "The response satisfies few criteria.",
            "The response satisfies about half of the criteria.",
            "The response satisfies most criteria; a minor one is missed.",
        ),
    }[n]
    return Rubric(question, (low, *middle, top))
