"""``Judge``: the base of every judge. A judge implements two item methods (``agrade_items``, ``acompare_items``)
and declares its ``format``, ``sampling``, ``stats`` and ``capabilities``; the list forms, pairwise verdicts
through grades and the sync forms are written here once, each taking ``outage=`` (a ``Retry``)."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypedDict, TypeVar, Unpack

from prom_reward.backends.bridge import sync_method
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.core.combine import TIE_SAMPLING, TieRounds
from prom_reward.core.items import GradeItem, Item, PairItem, absolute_items, check_rubrics, item_list, relative_items
from prom_reward.core.results import (
    Grade,
    JudgeFailure,
    JudgeStats,
    Judgment,
    Verdict,
    failed_grade,
    failed_verdict,
    with_failed,
)
from prom_reward.declared import refuse_unknown
from prom_reward.errors import InputError
from prom_reward.format.judge_format import JudgeFormat, Task, check_task
from prom_reward.format.rubrics import RubricsLike

J = TypeVar("J", bound=Judgment)


class Retry(Protocol):
    """An outage policy at work (``rewards.outage.Outage``): ``call``'s outcomes, transport failures asked again."""

    async def aoutcomes(
        self,
        items: Sequence[Any],
        call: Callable[..., Awaitable[list[J]]],
        failed: Callable[[JudgeFailure], J],
        options: CallOptions,
    ) -> list[J]: ...


@dataclass(frozen=True)
class JudgeCapabilities:
    """What a judge declares about itself, for its callers (rewards, jobs, the cascade)."""

    num_samples: int = 1
    """Samples per item when a call does not say."""
    max_tie_rounds: int = 5
    """Re-grading rounds of ``compare_by_grades`` ties when a call does not say."""
    confidence: bool = False
    """Whether its results carry token-logprob confidence indicators (what a cascade's ``se`` reads)."""
    neutralize_markers: bool = True
    """Whether template markers and chat special tokens inside judged texts are rewritten (``format.sanitize``)."""
    special_tokens: tuple[str, ...] = ()
    """Its chat special tokens neutralised in judged texts, besides ``sanitize.SPECIAL_TOKENS``."""
    thread_safe: bool = False
    """Whether several threads may call it at once (the batched reward then runs batches concurrently)."""


class CallOptions(TypedDict, total=False):
    """The per-call options of the item methods."""

    num_samples: int | None  # samples per item (None: ``capabilities.num_samples``)
    sampling: SamplingOverrides  # sampling options merged over the judge's for this call
    truncate_response: bool | None  # shorten over-long responses to fit (None: the judge's own setting)
    deadline: float | None  # monotonic time that bounds the transport's attempts
    attempt: int  # the requests' number (tie rounds re-grade with others, so a judgment store keeps them apart)


class ByGrades(TypedDict, total=False):
    """The options of ``compare_by_grades``."""

    max_tie_rounds: int | None  # re-grading rounds of tied pairs (None: ``capabilities.max_tie_rounds``)
    num_samples: int | None  # samples per grade (None: ``capabilities.num_samples``)
    deadline: float | None  # monotonic time that bounds the transport's attempts
    outage: Retry | None  # transport failures asked again under that policy


class Judge(ABC):
    """A judge of absolute grades and pairwise verdicts ("A"/"B"), one result per item, in order; a failed
    judgment is a result with ``score``/``winner`` None and its ``error``, never an exception for one item."""

    format: JudgeFormat
    """Its judge format: prompts, parser, verdict tokens and the markers neutralised in judged texts."""
    sampling: SamplingConfig
    """The sampling options every call starts from."""
    stats: JudgeStats
    """Running counters (calls, samples, tokens ...); a composite judge's own are in ``stats.counters``."""
    capabilities: JudgeCapabilities

    @abstractmethod
    async def agrade_items(self, items: Sequence[GradeItem], **options: Unpack[CallOptions]) -> list[Grade]:
        """Absolute grades of ``items``, one per item, in order."""

    @abstractmethod
    async def acompare_items(
        self, items: Sequence[PairItem], *, swap: bool = False, **options: Unpack[CallOptions]
    ) -> list[Verdict]:
        """Pairwise verdicts of ``items``, one per item, in order; ``swap``: judge both orders and combine them."""

    def close(self) -> None:  # noqa: B027 (a judge that holds nothing has nothing to release)
        """Release what the judge holds (engines, HTTP clients)."""

    # -- written once, over the item methods; ``outage``: transport failures asked again under that policy --------
    async def _outage_grades(
        self, items: Sequence[GradeItem], *, outage: Retry | None = None, **options: Unpack[CallOptions]
    ) -> list[Grade]:
        if outage is None:
            return await self.agrade_items(items, **options)
        return await outage.aoutcomes(items, self.agrade_items, failed_grade, options)

    async def _outage_verdicts(
        self,
        items: Sequence[PairItem],
        *,
        swap: bool = False,
        outage: Retry | None = None,
        **options: Unpack[CallOptions],
    ) -> list[Verdict]:
        if outage is None:
            return await self.acompare_items(items, swap=swap, **options)
        call, failed = functools.partial(self.acompare_items, swap=swap), functools.partial(failed_verdict, swap=swap)
        return await outage.aoutcomes(items, call, failed, options)

    grade_items = sync_method(_outage_grades)
    """``agrade_items``, waited for; ``outage``: its transport failures asked again under that policy."""
    compare_items = sync_method(_outage_verdicts)
    """``acompare_items``, waited for; ``outage``: its transport failures asked again under that policy."""

    async def acompare_items_by_grades(self, items: Sequence[PairItem], **options: Unpack[ByGrades]) -> list[Verdict]:
        """Pairwise verdicts of ``items`` from the absolute grades of A and B, ties re-graded (``TieRounds``)."""
        refuse_unknown(options, sorted(ByGrades.__optional_keys__), "option", "compare_by_grades")
        ties = TieRounds(*self._checked(items, PairItem, "absolute"))
        todo = list(range(len(ties.pairs)))
        rounds = options.get("max_tie_rounds")
        for tie_round in range((self.capabilities.max_tie_rounds if rounds is None else rounds) + 1):
            if not todo:  # round 0 grades every pair, then the tied ones again
                break
            asked = CallOptions(
                num_samples=options.get("num_samples"),
                sampling=TIE_SAMPLING if tie_round else None,
                attempt=1000 * tie_round,  # so a judgment store keeps the rounds apart
                deadline=options.get("deadline"),
            )
            graded = await self._outage_grades(ties.grade_items(todo), outage=options.get("outage"), **asked)
            ties.record(todo, graded)
            todo = ties.tied()
        return ties.verdicts()

    def _checked(self, items: Sequence[Item], cls: type[Item], task: Task) -> tuple[list[Item], dict[int, InputError]]:
        """``items`` checked for ``task`` (a list of ``cls``), and each one's rubric fault."""
        check_task(self.format, task)
        batch = item_list(items, cls)
        return batch, check_rubrics(batch, self.format, task)

    def _build(
        self, task: Task, items_of: Callable[..., list[Item]], *lists: object, fit: bool = True
    ) -> tuple[int, list[Item], dict[int, InputError]]:
        """The items of parallel ``lists`` for ``task``: how many, those built and each other one's fault."""
        check_task(self.format, task)
        failed: dict[int, InputError] = {}
        items = items_of(*lists, failed=failed, judge_format=self.format if fit else None)
        return len(items), [it for i, it in enumerate(items) if i not in failed], failed

    async def agrade(
        self,
        instructions: Sequence[str],
        responses: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        outage: Retry | None = None,
        **options: Unpack[CallOptions],
    ) -> list[Grade]:
        """``agrade_items`` of the items made from parallel lists; ``rubric``: one for all or one per item. An item's
        own fault fails that item; lists of different lengths raise ``InputError``."""
        n, built, failed = self._build("absolute", absolute_items, instructions, responses, rubric, reference_answers)
        judged = await self._outage_grades(built, outage=outage, **options)
        return with_failed(n, failed, judged, failed_grade)

    async def acompare(
        self,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        swap: bool = False,
        outage: Retry | None = None,
        **options: Unpack[CallOptions],
    ) -> list[Verdict]:
        """``acompare_items`` of the items made from parallel lists; ``swap``: judge both orders and combine them."""
        pairs = (instructions, responses_a, responses_b, rubric, reference_answers)
        n, built, failed = self._build("relative", relative_items, *pairs)
        judged = await self._outage_verdicts(built, swap=swap, outage=outage, **options)
        return with_failed(n, failed, judged, functools.partial(failed_verdict, swap=swap))

    async def acompare_by_grades(
        self,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        **options: Unpack[ByGrades],
    ) -> list[Verdict]:
        """``acompare_items_by_grades`` of the items made from parallel lists (their rubrics checked for grading)."""
        pairs = (instructions, responses_a, responses_b, rubric, reference_answers)
        n, built, failed = self._build("absolute", relative_items, *pairs, fit=False)
        return with_failed(n, failed, await self.acompare_items_by_grades(built, **options), failed_verdict)

    compare_items_by_grades = sync_method(acompare_items_by_grades)
    grade, compare, compare_by_grades = sync_method(agrade), sync_method(acompare), sync_method(acompare_by_grades)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
