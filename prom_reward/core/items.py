"""Validation of judge batches, done before any generation starts.

Every error names the item index and the field, says what arrived, and the fix. A batch whose shape is
wrong (lists of different lengths, a string where a list belongs) raises; an item whose own text or rubric is
unusable raises too, unless the caller passes ``failed``: then that item's ``InputError`` is recorded there
(the judge turns it into that item's failed result) and the item keeps a placeholder, so its batch-mates are
judged.

Example:
    >>> items = absolute_items(["Say hi"], ["hi"], "helpfulness")
    >>> items[0].rubric.criteria[:8], items[0].reference_answer
    ('Does the', None)
    >>> absolute_items(["a", "b"], ["x"], "helpfulness")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InputError: responses has 1 items but instructions has 2 ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar, cast, final

from prom_reward.errors import InputError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, Task, get_judge_format
from prom_reward.format.resolve import RubricResolver
from prom_reward.format.rubrics import Rubric, RubricLike, RubricsLike, get_rubric


@final
@dataclass(frozen=True)
class AbsoluteItem:
    """One validated absolute-grading input."""

    instruction: str
    response: str
    rubric: Rubric
    reference_answer: str | None


@final
@dataclass(frozen=True)
class RelativeItem:
    """One validated pairwise-ranking input."""

    instruction: str
    response_a: str
    response_b: str
    rubric: Rubric
    reference_answer: str | None


Item = TypeVar("Item", AbsoluteItem, RelativeItem)
"""An absolute or a pairwise item (what the judge's shared plumbing takes)."""


def _as_list(name: str, value: object, n: int | None) -> list[object]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        one = name[:-1] if name.endswith("s") else name
        hint = f"; for a single item pass [{one}]" if isinstance(value, str) else ""
        raise InputError(f"{name}: expected a list of strings, got {type(value).__name__}{hint}", field=name)
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
            index=index,
            field=field,
        ) from None


Failed = dict[int, InputError] | None
"""Where per-item faults go (item index -> its ``InputError``); None: raise them."""


def _fault(failed: Failed, error: InputError) -> None:
    """Record ``error`` for its item in ``failed`` (the first fault of an item wins), or raise it."""
    if failed is None:
        raise error
    failed.setdefault(cast(int, error.index), error)


def _text(x: object, i: int, field: str) -> str:
    if not isinstance(x, str):
        raise InputError(
            f"item {i}: {field} must be a str, got {type(x).__name__} ({str(x)[:60]!r}); "
            "convert it to text (or drop the item) before judging",
            index=i,
            field=field,
        )
    check_text(x, i, field)
    return x


def _strings(name: str, value: object, n: int | None, field: str, failed: Failed) -> list[str]:
    out: list[str] = []
    for i, x in enumerate(_as_list(name, value, n)):
        try:
            out.append(_text(x, i, field))
        except InputError as e:
            _fault(failed, e)
            out.append("")
    return out


def _references(value: object, n: int, failed: Failed) -> list[str | None]:
    if value is None:
        return [None] * n
    refs: list[str | None] = []
    for i, r in enumerate(_as_list("reference_answers", value, n)):
        try:
            if r is not None and not isinstance(r, str):
                raise InputError(
                    f"item {i}: reference_answer must be a str or None, got {type(r).__name__}",
                    index=i,
                    field="reference_answer",
                )
            refs.append(r if r is None else _text(r, i, "reference_answer"))
        except InputError as e:
            _fault(failed, e)
            refs.append(None)
    return refs


def _rubrics(
    value: RubricsLike, n: int, *, task: Task, judge_format: JudgeFormat | None, failed: Failed
) -> list[Rubric]:
    """One ``Rubric`` per item from one rubric for all (resolved once: unusable, it raises for the whole
    call) or a list of ``n`` (``RubricResolver``: each distinct value resolved once; a None item, or one
    that does not fit the judge format for ``task`` (``JudgeFormat.rubric_problem``; None: not checked
    here), is that item's ``InputError``)."""
    resolver = RubricResolver(
        judge_format=judge_format, task=task, missing_hint="pass a Rubric, a built-in name or a rubric dict"
    )

    def resolve(r: object, index: int | None = None) -> Rubric:
        return resolver(cast(RubricLike | None, r), index=index, field="rubric")

    if not isinstance(value, Sequence) or isinstance(value, (str, bytes, Rubric)):
        return [resolve(value)] * n if n else []
    out: list[Rubric] = []
    for i, r in enumerate(_as_list("rubrics", value, n)):
        try:
            out.append(resolve(r, i))
        except InputError as e:
            _fault(failed, e)
            out.append(out[-1] if out else get_rubric("helpfulness"))  # a placeholder: the item is failed
    return out


def absolute_items(
    instructions: Sequence[str],
    responses: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None = None,
    *,
    failed: Failed = None,
    judge_format: str | JudgeFormat | None = DEFAULT_FORMAT,
) -> list[AbsoluteItem]:
    """Validate an absolute-grading batch; raises InputError naming item and field (an item's own fault goes
    to ``failed`` when given; rubrics are checked against ``judge_format``; None: not
    checked here, the judge checks them against its own)."""
    ins = _strings("instructions", instructions, None, "instruction", failed)
    n = len(ins)
    res = _strings("responses", responses, n, "response", failed)
    refs = _references(reference_answers, n, failed)
    fmt = None if judge_format is None else get_judge_format(judge_format)
    rubs = _rubrics(rubric, n, task="absolute", judge_format=fmt, failed=failed)
    return [AbsoluteItem(*t) for t in zip(ins, res, rubs, refs, strict=True)]


def relative_items(
    instructions: Sequence[str],
    responses_a: Sequence[str],
    responses_b: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None = None,
    *,
    failed: Failed = None,
    judge_format: str | JudgeFormat | None = DEFAULT_FORMAT,
) -> list[RelativeItem]:
    """Validate a pairwise batch; raises InputError naming item and field (an item's own fault goes to
    ``failed`` when given; rubrics are checked against ``judge_format``; None: not
    checked here, the judge checks them against its own)."""
    ins = _strings("instructions", instructions, None, "instruction", failed)
    n = len(ins)
    a = _strings("responses_a", responses_a, n, "response_a", failed)
    b = _strings("responses_b", responses_b, n, "response_b", failed)
    refs = _references(reference_answers, n, failed)
    fmt = None if judge_format is None else get_judge_format(judge_format)
    rubs = _rubrics(rubric, n, task="relative", judge_format=fmt, failed=failed)
    return [RelativeItem(*t) for t in zip(ins, a, b, rubs, refs, strict=True)]
