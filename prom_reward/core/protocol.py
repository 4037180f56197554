"""``Judge``: what rewards, preference builders, jobs and the cascade need from a judge.

``PrometheusJudge`` and ``prom_reward.experimental.CascadeJudge`` implement it; so may any object with the
same methods (a judge behind another API, a test double). Code that takes a judge types it ``Judge``, never ``Any``:
grades and verdicts for batches of items, the sampling options in use, running statistics, the
samples per item, and ``close``; and what callers need to know about it, declared here rather than
probed: whether its results carry confidence indicators (``confidence``), how it neutralises judged texts
(``neutralize_markers``, ``special_tokens``, its ``format``'s markers) and whether it takes concurrent calls
(``thread_safe``). What a composite judge counts besides (a cascade's routing) is in its ``stats.counters``.

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge: Judge = PrometheusJudge(backend="scripted", outputs=["Exact. [RESULT] 5"])
    >>> isinstance(judge, Judge), judge.num_samples, judge.grade(["2+2?"], ["4"], "helpfulness")[0].score
    (True, 1, 5.0)
    >>> judge.neutralize_markers, judge.thread_safe, judge.stats.counters
    (True, False, {})
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.core.results import Grade, JudgeStats, Verdict
from prom_reward.format.judge_format import JudgeFormat
from prom_reward.format.rubrics import RubricsLike

__all__ = ["Judge"]


@runtime_checkable
class Judge(Protocol):
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

    def grade(
        self,
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
        """Absolute grades of each (instruction, response); ``rubric``: one for all, or one per item;
        ``truncate_response``: shorten over-long responses to fit (None: the judge's own setting); ``deadline``:
        monotonic time that bounds the transport's attempts."""
        ...

    def compare(
        self,
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
        """Pairwise verdicts; ``swap``: judge both orders and combine them."""
        ...

    def compare_by_grades(
        self,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
    ) -> list[Verdict]:
        """Pairwise verdicts from the absolute grades of A and B (ties re-graded)."""
        ...

    async def agrade(
        self,
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
        """``grade``, awaited on the caller's event loop (the rewards' path)."""
        ...

    async def acompare(
        self,
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
        """``compare``, awaited on the caller's event loop."""
        ...

    async def acompare_by_grades(
        self,
        instructions: Sequence[str],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        rubric: RubricsLike,
        reference_answers: Sequence[str | None] | None = None,
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
    ) -> list[Verdict]:
        """``compare_by_grades``, awaited on the caller's event loop."""
        ...

    def close(self) -> None:
        """Release what the judge holds (engines, HTTP clients)."""
        ...
