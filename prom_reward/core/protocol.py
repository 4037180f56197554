"""``Judge``: what rewards, preference builders, jobs and the cascade need from a judge.

``PrometheusJudge`` and ``prom_reward.experimental.CascadeJudge`` implement it; so may any object with the
same methods (a judge behind another API, a test double). Code that takes a judge types it ``Judge``, never ``Any``:
grades and verdicts for batches of items (``GradeItem`` / ``PairItem``; the list forms build them), the sampling
options in use, running statistics, the samples per item, and ``close``; and what callers need to know about it,
declared here rather than probed: whether its results carry confidence indicators (``confidence``), how it
neutralises judged texts (``neutralize_markers``, ``special_tokens``, its ``format``'s markers) and whether it takes
concurrent calls (``thread_safe``). What a composite judge counts besides (a cascade's routing) is in its
``stats.counters``. The list forms (``grade``, ``compare`` and their awaited forms) are written once, over the item
methods (``ListForms``, which ``Judge`` extends): a judge inherits them.

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge: Judge = PrometheusJudge(backend="scripted", outputs=["Exact. [RESULT] 5"])
    >>> from prom_reward.core.items import GradeItem
    >>> item = GradeItem("2+2?", "4", "helpfulness")
    >>> isinstance(judge, Judge), judge.num_samples, judge.grade_items([item])[0].score
    (True, 1, 5.0)
    >>> judge.neutralize_markers, judge.thread_safe, judge.stats.counters
    (True, False, {})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypedDict, runtime_checkable

from prom_reward.backends.bridge import sync_method
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.core.by_grades import failed_pair
from prom_reward.core.items import GradeItem, Item, PairItem, absolute_items, relative_items
from prom_reward.core.outcomes import failed_grade, failed_verdict, with_failed
from prom_reward.core.results import Grade, JudgeStats, Verdict
from prom_reward.errors import InputError
from prom_reward.format.judge_format import JudgeFormat, Task, check_task
from prom_reward.format.rubrics import RubricsLike

__all__ = ["CallOptions", "Judge", "ListForms"]


class CallOptions(TypedDict):
    """The per-call options of the item methods (what a judge that delegates passes on)."""

    num_samples: int | None
    """Samples per item (None: the judge's ``num_samples``)."""
    sampling: SamplingOverrides
    """Sampling options merged over the judge's for this call."""
    truncate_response: bool | None
    """Shorten over-long responses to fit (None: the judge's own setting)."""
    deadline: float | None
    """Monotonic time that bounds the transport's attempts."""


def _build(
    judge: Judge, task: Task, items_of: Callable[..., list[Item]], *lists: object, fit: bool = True
) -> tuple[int, list[Item], dict[int, InputError]]:
    """The items of parallel ``lists`` (``items_of``: ``absolute_items`` / ``relative_items``) for ``judge``'s
    ``task``: how many, those that were built (in order) and each other one's fault. ``fit``: their rubrics are
    checked against the judge's format here (False: the item method checks them, for a task other than the
    items' own)."""
    check_task(judge.format, task)
    failed: dict[int, InputError] = {}
    items = items_of(*lists, failed=failed, judge_format=judge.format if fit else None)
    return len(items), [it for i, it in enumerate(items) if i not in failed], failed


class ListForms(Protocol):
    """The list forms of a judge (``grade``, ``compare``, ``compare_by_grades`` and their awaited forms), written
    once over its item methods: each builds the items of its parallel lists (``core.items.absolute_items`` /
    ``relative_items``: validated there, their rubrics checked against the judge's format), hands the items that
    could be built to the judge's async item method (``agrade_items``, ``acompare_items``,
    ``acompare_items_by_grades``) and puts each item that could not back in its place as its ``input`` failure
    (``core.outcomes.failed_grade`` / ``failed_verdict``, ``core.by_grades.failed_pair``): a batch whose
    shape is wrong (lists of different lengths) raises ``InputError``, one item's fault fails that item alone.
    The sync forms wait for the async ones (``backends.bridge.sync_method``). ``Judge`` declares them through
    it; ``PrometheusJudge`` and ``prom_reward.experimental.CascadeJudge`` inherit them (so may another judge).

    Example:
        >>> from prom_reward.core.judge import PrometheusJudge
        >>> judge = PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"])
        >>> [(g.score, g.error and g.error.kind) for g in judge.grade(["q", "q"], ["ok", 7], "helpfulness")]
        [(4.0, None), (None, 'input')]
    """

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
        """``agrade_items`` of the items made from parallel lists (``core.items.absolute_items``), awaited on the
        caller's event loop (the rewards' path; ``grade`` is its sync form); ``rubric`` is one rubric (name,
        Rubric, dict, file) for all items or a list with one per item. An item's own fault fails that item; lists
        of different lengths raise ``InputError``."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        n, built, failed = _build(self, "absolute", absolute_items, instructions, responses, rubric, reference_answers)
        return with_failed(n, failed, await self.agrade_items(built, **opts), failed_grade)

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
        """``acompare_items`` of the items made from parallel lists (``core.items.relative_items``), awaited on the
        caller's event loop (``compare`` is its sync form); ``swap``: judge both orders and combine them. An item's
        own fault fails that item."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        pairs = (instructions, responses_a, responses_b, rubric, reference_answers)
        n, built, failed = _build(self, "relative", relative_items, *pairs)
        judged = await self.acompare_items(built, swap=swap, **opts)
        return with_failed(n, failed, judged, lambda e: failed_verdict(e, swap))

    async def acompare_by_grades(
        self: Judge,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
    ) -> list[Verdict]:
        """``acompare_items_by_grades`` of the items made from parallel lists (``core.items.relative_items``; the
        judge checks their rubrics for grading), awaited on the caller's event loop (``compare_by_grades`` is its
        sync form). An item's own fault fails that item."""
        pairs = (instructions, responses_a, responses_b, rubric, reference_answers)
        n, built, failed = _build(self, "absolute", relative_items, *pairs, fit=False)
        judged = await self.acompare_items_by_grades(built, max_tie_rounds=max_tie_rounds, num_samples=num_samples)
        return with_failed(n, failed, judged, failed_pair)

    grade, compare, compare_by_grades = sync_method(agrade), sync_method(acompare), sync_method(acompare_by_grades)


@runtime_checkable
class Judge(ListForms, Protocol):
    """A judge of absolute grades (1..5) and pairwise verdicts ("A"/"B"), one result per item, in order;
    a failed judgment is a result with ``score``/``winner`` None, never an exception for one item."""

    @property
    def sampling(self) -> SamplingConfig:
        """The sampling options every call starts from."""
        ...

    @property
    def stats(self) -> JudgeStats:
        """Running counters (calls, samples, tokens ...) over the judge's lifetime."""
        ...

    @property
    def num_samples(self) -> int:
        """Samples per item when a call does not say."""
        ...

    @property
    def confidence(self) -> bool:
        """Whether its results carry token-logprob confidence indicators (what a cascade's ``se`` reads)."""
        ...

    @property
    def neutralize_markers(self) -> bool:
        """Whether template markers and chat special tokens inside judged texts are rewritten before they
        reach the judge prompt (``prom_reward.format.sanitize``); rewards neutralise their samples alike."""
        ...

    @property
    def format(self) -> JudgeFormat:
        """Its judge format (``prom_reward.format.judge_format``): prompts, parser, verdict tokens and the markers
        neutralised in judged texts; rewards neutralise their samples' other fields with the same markers."""
        ...

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The judge's chat special tokens neutralised in judged texts, besides ``sanitize.SPECIAL_TOKENS``."""
        ...

    @property
    def thread_safe(self) -> bool:
        """Whether several threads may call the judge at once (the batched reward then runs batches
        concurrently)."""
        ...

    def grade_items(
        self,
        items: Sequence[GradeItem],
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """Absolute grades of ``items`` (``GradeItem``), one per item, in order; ``truncate_response``: shorten
        over-long responses to fit (None: the judge's own setting); ``deadline``: monotonic time that bounds the
        transport's attempts."""
        ...

    def compare_items(
        self,
        items: Sequence[PairItem],
        *,
        swap: bool = False,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """Pairwise verdicts of ``items`` (``PairItem``), one per item, in order; ``swap``: judge both orders
        and combine them."""
        ...

    async def agrade_items(
        self,
        items: Sequence[GradeItem],
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """``grade_items``, awaited on the caller's event loop (the rewards' path)."""
        ...

    async def acompare_items(
        self,
        items: Sequence[PairItem],
        *,
        swap: bool = False,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """``compare_items``, awaited on the caller's event loop."""
        ...

    def compare_items_by_grades(
        self,
        items: Sequence[PairItem],
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """Pairwise verdicts of ``items`` (``PairItem``) from the absolute grades of A and B (ties re-graded), one
        per item, in order."""
        ...

    async def acompare_items_by_grades(
        self,
        items: Sequence[PairItem],
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """``compare_items_by_grades``, awaited on the caller's event loop."""
        ...

    def close(self) -> None:
        """Release what the judge holds (engines, HTTP clients)."""
        ...
