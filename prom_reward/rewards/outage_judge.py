"""``OutageJudge``: a judge whose transport failures are asked again by an outage policy, for the jobs.

The transport makes one attempt per request and reports a failed one as that item's ``transport`` failure
(``backends/_openai_http.py``); the rewards ask again for those items through ``outage.ajudge_until_answered``
around their judge call. A job (``grade``, ``compare``, ``pairs``) calls its judge's methods from many places
(rows, checklists, pair strategies, tie-breaks), so it gets the same policy by judging through this judge:
each item method (``agrade_items``, ``acompare_items``, ``acompare_items_by_grades``) is one
``outage.aoutcomes_until_answered`` over the wrapped judge's, and the list forms (``grade``, ``compare``,
``compare_by_grades`` and their awaited forms) reach them through ``ListForms``. What the judge answered is
kept; an item the transport failed is asked again after the policy's back-off, within its budget; past it,
``on_exhausted`` decides: ``"fail"`` leaves the item's transport failure (a job marks its rows for
``--resume``) and ``"raise"`` raises ``JudgeUnavailableError``. The wrapped judge's properties (format,
sampling, stats ...) are its own.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> judge = OutageJudge(PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"]), OutagePolicy())
    >>> [g.score for g in judge.grade(["Say hi."], ["hi"], "helpfulness")], judge.format.name
    ([4.0], 'prometheus2')
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from prom_reward.backends.bridge import sync_method
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.protocol import Judge, ListForms
from prom_reward.core.results import Grade, JudgeFailure, JudgeStats, Verdict
from prom_reward.format.judge_format import JudgeFormat
from prom_reward.rewards.outage import JudgeHealth, OutagePolicy, aoutcomes_until_answered


def _failed_grade(failure: JudgeFailure) -> Grade:
    return Grade(None, error=failure)


def _failed_verdict(failure: JudgeFailure) -> Verdict:
    return Verdict(None, error=failure)


class OutageJudge(ListForms):
    """``judge`` with its transport failures asked again per ``policy`` (see the module docstring); ``health``
    records the failures and successes (a fresh ``JudgeHealth`` when None)."""

    def __init__(self, judge: Judge, policy: OutagePolicy, health: JudgeHealth | None = None) -> None:
        self.judge = judge
        """The judge asked."""
        self.policy = policy
        """How its transport failures are asked again."""
        self.health = health if health is not None else JudgeHealth()
        """What the calls saw (failure streak, cause)."""

    def __repr__(self) -> str:
        return f"OutageJudge({self.judge!r}, {self.policy!r})"

    @property
    def sampling(self) -> SamplingConfig:
        return self.judge.sampling

    @property
    def stats(self) -> JudgeStats:
        return self.judge.stats

    @property
    def num_samples(self) -> int:
        return self.judge.num_samples

    @property
    def confidence(self) -> bool:
        return self.judge.confidence

    @property
    def neutralize_markers(self) -> bool:
        return self.judge.neutralize_markers

    @property
    def format(self) -> JudgeFormat:
        return self.judge.format

    @property
    def special_tokens(self) -> tuple[str, ...]:
        return self.judge.special_tokens

    @property
    def thread_safe(self) -> bool:
        return self.judge.thread_safe

    async def agrade_items(
        self,
        items: Sequence[GradeItem],
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """The wrapped judge's ``agrade_items``, its transport failures asked again; ``deadline`` bounds it all."""
        call = functools.partial(
            self.judge.agrade_items, num_samples=num_samples, sampling=sampling, truncate_response=truncate_response
        )
        return await aoutcomes_until_answered(
            items, call, _failed_grade, self.policy, deadline=deadline, health=self.health
        )

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
        """The wrapped judge's ``acompare_items``, its transport failures asked again."""
        call = functools.partial(
            self.judge.acompare_items,
            swap=swap,
            num_samples=num_samples,
            sampling=sampling,
            truncate_response=truncate_response,
        )
        return await aoutcomes_until_answered(
            items, call, _failed_verdict, self.policy, deadline=deadline, health=self.health
        )

    async def acompare_items_by_grades(
        self,
        items: Sequence[PairItem],
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """The wrapped judge's ``acompare_items_by_grades``, the pairs the transport failed asked again (tie rounds
        included)."""
        call = functools.partial(
            self.judge.acompare_items_by_grades, max_tie_rounds=max_tie_rounds, num_samples=num_samples
        )
        return await aoutcomes_until_answered(
            items, call, _failed_verdict, self.policy, deadline=deadline, health=self.health
        )

    grade_items, compare_items = sync_method(agrade_items), sync_method(acompare_items)
    compare_items_by_grades = sync_method(acompare_items_by_grades)

    def close(self) -> None:
        """Close the wrapped judge."""
        self.judge.close()

    def __enter__(self) -> OutageJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["OutageJudge"]
