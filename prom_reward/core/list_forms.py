"""``ListForms``: a judge's list forms (``grade``, ``compare`` and their awaited forms), written once over its item
methods.

A list form takes parallel lists (``grade(instructions, responses, rubric, reference_answers)``), builds the
items (``core.items.absolute_items`` / ``relative_items``: validated there, their rubrics checked against the
judge's format), hands the items that could be built to the judge's item method (``grade_items``,
``compare_items``, ``agrade_items``, ``acompare_items``) and puts each item that could not back in its place as
a failed outcome (``input``, ``core.outcomes.input_outcome``): a batch whose shape is wrong (lists of different
lengths) raises ``InputError``, one item's fault fails that item alone. ``PrometheusJudge`` and
``prom_reward.experimental.CascadeJudge`` inherit them; the ``Judge`` protocol declares them.

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"])
    >>> [(g.score, g.error and g.error.kind) for g in judge.grade(["q", "q"], ["ok", 7], "helpfulness")]
    [(4.0, None), (None, 'input')]
"""

from __future__ import annotations

from collections.abc import Sequence

from prom_reward.backends.sampling import SamplingOverrides
from prom_reward.core.items import GradeItem, Item, PairItem, absolute_items, relative_items
from prom_reward.core.outcomes import failed_grade, failed_verdict, with_failed
from prom_reward.core.protocol import CallOptions, Judge
from prom_reward.core.requests import check_task
from prom_reward.core.results import Grade, Verdict
from prom_reward.errors import InputError
from prom_reward.format.rubrics import RubricsLike

__all__ = ["ListForms"]


def _built(items: list[Item], failed: dict[int, InputError]) -> list[Item]:
    """The items that were built (not in ``failed``), in order: what the item method judges."""
    return [it for i, it in enumerate(items) if i not in failed]


def _grade_items(
    judge: Judge,
    instructions: Sequence[str],
    responses: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None,
) -> tuple[list[GradeItem], dict[int, InputError]]:
    """The ``GradeItem``s of parallel lists for ``judge`` and each item's fault."""
    check_task(judge.format, "absolute")
    failed: dict[int, InputError] = {}
    items = absolute_items(instructions, responses, rubric, reference_answers, failed=failed, judge_format=judge.format)
    return items, failed


def _pair_items(
    judge: Judge,
    instructions: Sequence[str],
    responses_a: Sequence[str],
    responses_b: Sequence[str],
    rubric: RubricsLike,
    reference_answers: Sequence[str | None] | None,
) -> tuple[list[PairItem], dict[int, InputError]]:
    """The ``PairItem``s of parallel lists for ``judge`` and each item's fault."""
    check_task(judge.format, "relative")
    failed: dict[int, InputError] = {}
    pairs = (instructions, responses_a, responses_b)
    items = relative_items(*pairs, rubric, reference_answers, failed=failed, judge_format=judge.format)
    return items, failed


class ListForms:
    """The list forms of the ``Judge`` protocol, over the judge's item methods (see the module docstring)."""

    def grade(
        self: Judge,
        instructions: Sequence[str],
        responses: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """``grade_items`` of the items made from parallel lists (``core.items.absolute_items``); ``rubric`` is
        one rubric (name, Rubric, dict, file) for all items or a list with one per item. An item's own fault
        fails that item; lists of different lengths raise ``InputError``."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        items, failed = _grade_items(self, instructions, responses, rubric, reference_answers)
        return with_failed(len(items), failed, self.grade_items(_built(items, failed), **opts), failed_grade)

    async def agrade(
        self: Judge,
        instructions: Sequence[str],
        responses: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """``grade``, awaited on the caller's event loop (``agrade_items``; the rewards' path)."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        items, failed = _grade_items(self, instructions, responses, rubric, reference_answers)
        return with_failed(len(items), failed, await self.agrade_items(_built(items, failed), **opts), failed_grade)

    def compare(
        self: Judge,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        swap: bool = False,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """``compare_items`` of the items made from parallel lists (``core.items.relative_items``); ``swap``:
        judge both orders and combine them. An item's own fault fails that item."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        items, failed = _pair_items(self, instructions, responses_a, responses_b, rubric, reference_answers)
        judged = self.compare_items(_built(items, failed), swap=swap, **opts)
        return with_failed(len(items), failed, judged, lambda e: failed_verdict(e, swap))

    async def acompare(
        self: Judge,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        swap: bool = False,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """``compare``, awaited on the caller's event loop (``acompare_items``)."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        items, failed = _pair_items(self, instructions, responses_a, responses_b, rubric, reference_answers)
        judged = await self.acompare_items(_built(items, failed), swap=swap, **opts)
        return with_failed(len(items), failed, judged, lambda e: failed_verdict(e, swap))
