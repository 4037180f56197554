"""``GradeItem`` and ``PairItem``: the judge's inputs, validated once where they are built (``InputError``
naming the field and the fix), and the list forms' builders ``absolute_items`` / ``relative_items``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast, final

from prom_reward.errors import InputError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, Task, get_judge_format
from prom_reward.format.rubrics import Rubric, RubricLike, RubricResolver, RubricsLike, get_rubric, one_for_all
from prom_reward.format.templates import unicode_problem

_RUBRIC_HINT = "pass a Rubric, a built-in name or a rubric dict"


def check_text(text: object, index: int | None, field: str) -> None:
    """Raise ``InputError`` when ``text`` is not a str, or not valid Unicode (a lone surrogate cannot be encoded)."""
    where = "" if index is None else f"item {index}: "
    if not isinstance(text, str):
        raise InputError(
            f"{where}{field} must be a str, got {type(text).__name__} ({str(text)[:60]!r}); "
            "convert it to text (or drop the item) before judging",
            index=index,
            field=field,
        )
    problem = unicode_problem(text)
    if problem is not None:
        raise InputError(
            f"{where}{field} {problem} and cannot be sent to the judge; decode the text with errors='replace'",
            index=index,
            field=field,
        )


def _check(item: GradeItem | PairItem, *texts: str) -> None:
    """Check ``item``'s ``texts`` and reference answer; its rubric becomes a ``Rubric``."""
    for name in texts:
        check_text(getattr(item, name), None, name)
    ref = item.reference_answer
    if ref is not None and not isinstance(ref, str):
        raise InputError(
            f"reference_answer must be a str or None, got {type(ref).__name__}; give the reference as text, "
            "or None for an item without one",
            field="reference_answer",
        )
    if ref is not None:
        check_text(ref, None, "reference_answer")
    if not isinstance(item.rubric, Rubric):
        rubric = RubricResolver(missing_hint=_RUBRIC_HINT)(cast(RubricLike | None, item.rubric), field="rubric")
        object.__setattr__(item, "rubric", rubric)


@final
@dataclass(frozen=True)
class GradeItem:
    """One absolute-grading input; building it validates it (``InputError`` naming the field and the fix)."""

    instruction: str
    """The instruction (the prompt) the response answers."""
    response: str
    """The response to grade."""
    rubric: Rubric
    """What it is graded on (a built-in name, ``Rubric``, dict, .json/.yaml path or ``[criteria]`` text)."""
    reference_answer: str | None = None
    """A reference answer (what a top grade looks like) shown to the judge, or None."""
    RESPONSES: ClassVar = ("response",)  # the judged texts (neutralised, shortened to fit)

    def __post_init__(self) -> None:
        _check(self, "instruction", "response")


@final
@dataclass(frozen=True)
class PairItem:
    """One pairwise input (which of ``response_a`` and ``response_b`` is better); validated where built."""

    instruction: str
    """The instruction (the prompt) both responses answer."""
    response_a: str
    """The first response ("A")."""
    response_b: str
    """The second response ("B")."""
    rubric: Rubric
    """What they are compared on (pairwise needs only its criteria); built like ``GradeItem.rubric``."""
    reference_answer: str | None = None
    """A reference answer shown to the judge, or None."""
    RESPONSES: ClassVar = ("response_a", "response_b")

    def __post_init__(self) -> None:
        _check(self, "instruction", "response_a", "response_b")


Item = TypeVar("Item", GradeItem, PairItem)


def map_responses(item: Item, f: Callable[[str], str]) -> Item:
    """``item`` with ``f`` applied to its response(s) (the judge neutralises them so); itself when none changed."""
    changed: dict[str, Any] = {n: text for n in item.RESPONSES if (text := f(getattr(item, n))) != getattr(item, n)}
    return dataclasses.replace(item, **changed) if changed else item


def item_list(items: object, cls: type[Item]) -> list[Item]:
    """``items`` as a list, each a ``cls`` (what ``grade_items`` / ``compare_items`` take); else ``InputError``."""
    if isinstance(items, (str, bytes, cls)) or not isinstance(items, Sequence):
        raise InputError(
            f"items: expected a list of {cls.__name__}, got {type(items).__name__}; for a single item pass [item]",
            field="items",
        )
    for i, it in enumerate(items):
        if not isinstance(it, cls):
            raise InputError(
                f"item {i}: expected a {cls.__name__}, got {type(it).__name__}; build it with "
                f"{cls.__name__}(...) (prom_reward.{cls.__name__})",
                index=i,
                field="items",
            )
    return list(items)


Failed = dict[int, InputError] | None  # where per-item faults go (item index -> its error); None: raise them


def _fault(failed: Failed, error: InputError) -> None:
    """Record ``error`` for its item in ``failed`` (the first fault of an item wins), or raise it."""
    if failed is None:
        raise error
    failed.setdefault(cast(int, error.index), error)


def check_rubrics(items: Sequence[Item], judge_format: JudgeFormat, task: Task) -> dict[int, InputError]:
    """The fault of each item whose rubric does not fit ``judge_format`` for ``task``, by position."""
    problem_of = functools.cache(lambda rubric: judge_format.rubric_problem(rubric, task))  # once per rubric
    problems = ((i, problem_of(it.rubric)) for i, it in enumerate(items))
    return {i: InputError(f"item {i}: rubric: {p}", index=i, field="rubric") for i, p in problems if p is not None}


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


def _rubrics(
    value: RubricsLike, n: int, *, task: Task, judge_format: JudgeFormat | None
) -> tuple[list[Rubric], dict[int, InputError]]:
    """One ``Rubric`` per item and each item's rubric fault: from one rubric for all (unusable, it raises) or a list
    of ``n`` (a None, or one that does not fit ``judge_format``, is that item's fault and keeps a placeholder)."""
    resolver = RubricResolver(judge_format=judge_format, task=task, missing_hint=_RUBRIC_HINT)
    if one_for_all(value):
        return ([resolver(value)] * n if n else []), {}
    out: list[Rubric] = []
    faults: dict[int, InputError] = {}
    for i, r in enumerate(_as_list("rubrics", value, n)):
        try:
            out.append(resolver(cast(RubricLike | None, r), index=i, field="rubric"))
        except InputError as e:
            faults[i] = e
            out.append(out[-1] if out else get_rubric("helpfulness"))  # a placeholder: the item is failed
    return out, faults


def _from_lists(
    cls: Callable[..., Item],
    task: Task,
    instructions: object,
    texts: Mapping[str, object],
    rubric: RubricsLike,
    reference_answers: object,
    failed: Failed,
    judge_format: str | JudgeFormat | None,
) -> list[Item]:
    """``cls`` items of parallel lists; an item's fault goes to ``failed`` (or raises), the item a placeholder."""
    ins = _as_list("instructions", instructions, None)
    n = len(ins)
    columns = [_as_list(name, value, n) for name, value in texts.items()]
    refs = [None] * n if reference_answers is None else _as_list("reference_answers", reference_answers, n)
    fmt = None if judge_format is None else get_judge_format(judge_format)
    rubs, rubric_faults = _rubrics(rubric, n, task=task, judge_format=fmt)
    out: list[Item] = []
    for i in range(n):
        try:
            item = cls(ins[i], *(column[i] for column in columns), rubs[i], refs[i])
        except InputError as e:
            _fault(failed, InputError(f"item {i}: {e}", index=i, field=e.field))
            item = cls("", *([""] * len(columns)), rubs[i])
        if i in rubric_faults:
            _fault(failed, rubric_faults[i])
        out.append(item)
    return out


def absolute_items(
    instructions: Sequence[str],
    responses: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None = None,
    *,
    failed: Failed = None,
    judge_format: str | JudgeFormat | None = DEFAULT_FORMAT,
) -> list[GradeItem]:
    """``GradeItem``s from parallel lists; raises ``InputError`` naming item and field (an item's own fault goes to
    ``failed`` when given); rubrics are checked against ``judge_format`` (None: not here)."""
    texts = {"responses": responses}
    return _from_lists(GradeItem, "absolute", instructions, texts, rubric, reference_answers, failed, judge_format)


def relative_items(
    instructions: Sequence[str],
    responses_a: Sequence[str],
    responses_b: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None = None,
    *,
    failed: Failed = None,
    judge_format: str | JudgeFormat | None = DEFAULT_FORMAT,
) -> list[PairItem]:
    """``PairItem``s from parallel lists, as ``absolute_items``."""
    texts = {"responses_a": responses_a, "responses_b": responses_b}
    return _from_lists(PairItem, "relative", instructions, texts, rubric, reference_answers, failed, judge_format)
