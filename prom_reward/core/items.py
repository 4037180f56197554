"""Validation of judge batches, done before any generation starts.

Every error names the item index and the field, says what arrived, and the fix.

Example:
    >>> items = absolute_items(["Say hi"], ["hi"], "helpfulness")
    >>> items[0].rubric.criteria[:8], items[0].reference_answer
    ('Does the', None)
    >>> absolute_items(["a", "b"], ["x"], "helpfulness")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InputError: responses has 1 items but instructions has 2 ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from prom_reward.errors import InputError, PromRewardError
from prom_reward.format.rubrics import Rubric, get_rubric

RubricLike = Any  # Rubric | str (name, path or formatted text) | dict


@dataclass(frozen=True)
class AbsoluteItem:
    """One validated absolute-grading input."""

    instruction: str
    response: str
    rubric: Rubric
    reference_answer: str | None


@dataclass(frozen=True)
class RelativeItem:
    """One validated pairwise-ranking input."""

    instruction: str
    response_a: str
    response_b: str
    rubric: Rubric
    reference_answer: str | None


def _as_list(name: str, value: Any, n: int | None) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        hint = f"; for a single item pass [{name[:-1] if name.endswith('s') else name}]" if isinstance(value, str) else ""
        raise InputError(
            f"{name}: expected a list of strings, got {type(value).__name__}{hint}", field=name
        )
    items = list(value)
    if n is not None and len(items) != n:
        raise InputError(
            f"{name} has {len(items)} items but instructions has {n}; every list must have one entry per item",
            field=name,
        )
    return items


def check_text(text: str, index: int, field: str) -> None:
    """Raise ``InputError`` when ``text`` is not valid Unicode (a lone surrogate cannot be encoded).

    >>> check_text("fine", 0, "response")
    >>> check_text("bad \\ud800", 3, "response")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InputError: item 3: response holds a lone surrogate ...
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(
            f"item {index}: {field} holds a lone surrogate ({text[e.start]!r} at character {e.start}), which is not "
            "valid Unicode text and cannot be sent to the judge; decode the text with errors='replace'",
            index=index, field=field,
        ) from None


def _strings(name: str, value: Any, n: int | None, field: str) -> list[str]:
    items = _as_list(name, value, n)
    for i, x in enumerate(items):
        if not isinstance(x, str):
            raise InputError(
                f"item {i}: {field} must be a str, got {type(x).__name__} ({str(x)[:60]!r}); "
                "convert it to text (or drop the item) before judging",
                index=i, field=field,
            )
        check_text(x, i, field)
    return items


def _references(value: Any, n: int) -> list[str | None]:
    if value is None:
        return [None] * n
    refs = _as_list("reference_answers", value, n)
    for i, r in enumerate(refs):
        if r is not None and not isinstance(r, str):
            raise InputError(
                f"item {i}: reference_answer must be a str or None, got {type(r).__name__}",
                index=i, field="reference_answer",
            )
        if r is not None:
            check_text(r, i, "reference_answer")
    return refs


def _rubrics(value: RubricLike, n: int, *, need_scores: bool) -> list[Rubric]:
    many = isinstance(value, Sequence) and not isinstance(value, (str, bytes, Rubric))
    raw = _as_list("rubrics", value, n) if many else [value] * n
    cache: dict[int, Rubric] = {}
    out: list[Rubric] = []
    for i, r in enumerate(raw):
        key = id(r)
        if key not in cache:
            if r is None:
                raise InputError(f"item {i}: rubric is None; pass a Rubric, a built-in name or a rubric dict",
                                 index=i, field="rubric")
            try:
                cache[key] = get_rubric(r)
            except PromRewardError as e:
                raise InputError(f"item {i}: rubric: {e}", index=i, field="rubric") from e
        rubric = cache[key]
        if need_scores and not rubric.has_scores:
            raise InputError(
                f"item {i}: rubric {rubric.criteria[:60]!r} has no score descriptions; absolute grading needs "
                "five (score1_description..score5_description)", index=i, field="rubric",
            )
        out.append(rubric)
    return out


def absolute_items(instructions: Any, responses: Any, rubric: RubricLike,
                   reference_answers: Any = None) -> list[AbsoluteItem]:
    """Validate an absolute-grading batch; raises InputError naming item and field."""
    ins = _strings("instructions", instructions, None, "instruction")
    n = len(ins)
    res = _strings("responses", responses, n, "response")
    refs = _references(reference_answers, n)
    rubs = _rubrics(rubric, n, need_scores=True)
    return [AbsoluteItem(*t) for t in zip(ins, res, rubs, refs)]


def relative_items(instructions: Any, responses_a: Any, responses_b: Any, rubric: RubricLike,
                   reference_answers: Any = None) -> list[RelativeItem]:
    """Validate a pairwise batch; raises InputError naming item and field."""
    ins = _strings("instructions", instructions, None, "instruction")
    n = len(ins)
    a = _strings("responses_a", responses_a, n, "response_a")
    b = _strings("responses_b", responses_b, n, "response_b")
    refs = _references(reference_answers, n)
    rubs = _rubrics(rubric, n, need_scores=False)
    return [RelativeItem(*t) for t in zip(ins, a, b, rubs, refs)]
