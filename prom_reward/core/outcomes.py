"""One outcome per item: how the judge turns an item's fault (input, context, output, transport) into that
item's failed result, as a value."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from prom_reward.backends.base import Backend, GenerationRequest
from prom_reward.core.context import fit_to_context
from prom_reward.core.items import Item
from prom_reward.core.results import Grade, JudgeFailure, Verdict
from prom_reward.core.sampler import ItemRun
from prom_reward.errors import BackendError, InputError

_ITEM = re.compile(r"^(item|sample) \d+: ")
R = TypeVar("R", Grade, Verdict)


def input_failure(error: InputError) -> JudgeFailure:
    """An item's ``InputError`` as its failure (the message without the batch position)."""
    return JudgeFailure("input", _ITEM.sub("", str(error)))


async def fit_items(
    backend: Backend,
    items: list[Item],
    failed: dict[int, InputError],
    render: Callable[[Item], GenerationRequest],
    truncate: bool,
    deadline: float | None,
    known: Callable[[list[GenerationRequest]], list[bool]] | None = None,
) -> tuple[list[ItemRun], list[bool], list[int], list[GenerationRequest]]:
    """The requests still to sample: one run per item (a failed one empty, with its ``error``: ``failed``, or a
    prompt that cannot fit the context), the truncated flags, the positions of the items to sample and their
    requests (carrying ``deadline``). ``known``: which rendered requests a judgment store answers (not checked)."""
    runs = [ItemRun(error=input_failure(failed[i])) if i in failed else ItemRun() for i in range(len(items))]
    truncated = [False] * len(items)
    ok = [i for i in range(len(items)) if i not in failed]
    rendered = [render(items[i]) for i in ok]
    requests, cut, errors = await fit_to_context(
        backend,
        rendered,
        [items[i] for i in ok],
        render,
        truncate,
        known(rendered) if known and rendered else None,
        deadline,
    )
    for j, e in enumerate(errors):
        truncated[ok[j]] = cut[j]
        if e is not None:
            runs[ok[j]].error = input_failure(e)
    go = [j for j in range(len(ok)) if errors[j] is None]
    return runs, truncated, [ok[j] for j in go], [dataclasses.replace(requests[j], deadline=deadline) for j in go]


def failed_grade(failure: JudgeFailure) -> Grade:
    """The grade of an item nothing was judged for (its input's fault, or no call answered it)."""
    return Grade(None, error=failure)


def failed_verdict(failure: JudgeFailure, swap: bool = False) -> Verdict:
    """The verdict of a pair nothing was judged for: no winner in its order (both with ``swap``), with the reason."""
    return Verdict(None, error=failure, reason=failure.reason, order_winners=(None, None) if swap else (None,))


def with_failed(
    n: int, failed: dict[int, InputError], judged: Sequence[R], fail: Callable[[JudgeFailure], R]
) -> list[R]:
    """The results of ``n`` items: those in ``failed`` are ``fail`` of their input's fault, the others ``judged``."""
    rest = iter(judged)
    return [fail(input_failure(failed[i])) if i in failed else next(rest) for i in range(n)]


def all_answered(results: Sequence[Grade] | Sequence[Verdict]) -> None:
    """Raise the first ``transport`` failure among ``results`` as a ``BackendError`` (for the probe)."""
    for r in results:
        if r.error is not None and r.error.kind == "transport":
            raise BackendError(r.error.reason)
