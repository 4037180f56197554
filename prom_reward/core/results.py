"""Result types: one judge sample, an absolute ``Grade``, a pairwise ``Verdict`` (both ``Judgment``s; a failed
one has ``score``/``winner`` None, never a made-up number), a judge's running ``JudgeStats`` and the outcome of an
item that was not judged (``failed_grade``, ``failed_verdict``)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from prom_reward.confidence.indicators import Confidence
from prom_reward.errors import BackendError, InputError

_ITEM = re.compile(r"^(item|sample) \d+: ")
Winner = Literal["A", "B"]
FailureKind = Literal["input", "output", "transport"]
"""Whose fault a failed judgment is: its ``input``, the judge's ``output`` (no verdict) or the ``transport``."""


def tie_reason(swap_agreement: bool | None) -> str:
    """What a tie is called wherever it is counted: ``swap_disagreement`` (the orders disagree) or ``tie``."""
    return "swap_disagreement" if swap_agreement is False else "tie"


@dataclass(frozen=True)
class JudgeFailure:
    """Why one item has no judgment: a value in its result, never an exception raised for one item's fault."""

    kind: FailureKind
    """Whose fault it is: ``transport`` failures are the ones an outage policy retries."""
    reason: str
    """What went wrong and the fix, for the item alone (no batch position)."""


@dataclass(frozen=True)
class JudgeSample:
    """One generation of the judge, parsed."""

    text: str
    """The raw generated text (for a forced verdict: the original text, without the forcing suffix)."""
    feedback: str | None
    """Feedback before the verdict marker (None when nothing usable was written)."""
    verdict: int | str | None
    """1..5 (absolute), "A"/"B" (relative), or None when unparseable."""
    probabilities: dict[str, float] | None = None
    """Distribution over the verdicts at the verdict token, renormalised over those in its top-k; None without."""
    verdict_mass: float | None = None
    """Total probability the top-k logprobs gave to the allowed verdicts before renormalising."""
    forced: bool = False
    """True when the verdict was read after appending the format's ``force_prefix`` to feedback without one."""
    finish_reason: str | None = None
    """The engine's finish reason ('stop', 'length', ...)."""
    completion_tokens: int = 0
    """Tokens generated for this sample (including the forcing request, if any)."""
    entropy: float | None = None
    """Mean token entropy (nats) over the generated tokens, from their top-k logprobs; None without logprobs."""
    nll: float | None = None
    """Mean negative log-probability of the generated tokens; None without logprobs."""
    base_entropy: float | None = None
    """Mean token entropy of a base model reading ``text`` by teacher forcing (SE-Cali's); None otherwise."""
    scored_tokens: int = 0
    """Generated tokens with logprobs (what ``entropy`` and ``nll`` average over)."""
    reason: str | None = None
    """Without a verdict: why, in the judge format's words (``ParsedOutput.reason``); None otherwise."""


@dataclass(frozen=True, kw_only=True)
class Judgment(ABC):
    """What every judgment carries besides its verdict (``Grade``'s, ``Verdict``'s): the samples and their cost."""

    feedback: str | None = None
    """Feedback of the first valid sample (for a ``Verdict``: of the original order)."""
    samples: tuple[JudgeSample, ...] = ()
    """Every sample, valid or not, in generation order (a swapped order's follow, labelled as the judge saw them)."""
    retries: int = 0  # re-sampling rounds spent on unparseable outputs
    failures: int = 0  # samples without a verdict
    forced: int = 0  # valid samples whose verdict was forced
    prompt_tokens: int = 0  # sent for this item (all requests)
    completion_tokens: int = 0  # generated for this item (all samples)
    confidence: Confidence | None = None
    """Confidence indicators of this judgment (``confidence.indicators``)."""
    decided_by: str | None = None
    """Which judge decided (``"primary"`` or ``"fallback"`` under a ``CascadeJudge``; None otherwise)."""
    truncated: bool = False
    """True when a response was shortened to fit the judge's context (``truncate_response``)."""
    error: JudgeFailure | None = None
    """Why this item has no verdict when it failed; None when judged, or a tie."""

    @property
    @abstractmethod
    def ok(self) -> bool:
        """True when the judgment has a verdict (a score, a winner)."""

    @property
    def raw_outputs(self) -> tuple[str, ...]:
        """The raw text of every sample."""
        return tuple(s.text for s in self.samples)


@dataclass(frozen=True)
class Grade(Judgment):
    """Absolute grade of one response (1..5), over one or more samples."""

    score: float | None
    """Mean of the valid samples' scores; None when every sample failed to parse."""
    scores: tuple[int, ...] = ()  # each valid sample's score
    probabilities: dict[int, float] | None = None
    """Mean distribution over 1..5 at the verdict token (valid samples with logprobs)."""
    expected_score: float | None = None
    """Sum of k * P(k) under ``probabilities``: a continuous, tie-free score."""
    expected_reason: str | None = None
    """Why ``expected_score`` is None although a sample gave a verdict (``sampler.no_expected``)."""

    @property
    def ok(self) -> bool:
        """True when a score was obtained."""
        return self.score is not None

    @property
    def verdict(self) -> float | None:
        """Alias of ``score`` (the absolute verdict)."""
        return self.score

    def value(self, score: str) -> float | None:
        """The grade as one number: ``sample`` (the first sample's score), ``mean`` (``score``) or ``expected``."""
        if score == "sample":
            return float(self.scores[0]) if self.scores else None
        return self.score if score == "mean" else self.expected_score


@dataclass(frozen=True)
class Verdict(Judgment):
    """Pairwise verdict: which of responses A and B is better."""

    winner: Winner | None
    """"A", "B", or None (failure, or a tie/disagreement: see ``tie``)."""
    p_a: float | None = None
    """P(A is better): from the verdict-token probabilities, else the share of samples for A (mean of the orders)."""
    tie: bool = False
    """True when the judge could not separate the two (orders disagree, samples split, grades equal)."""
    order_winners: tuple[Winner | None, ...] = ()  # per order, in the original labels: (original, swapped)
    grades: tuple[Grade, Grade] | None = None  # for verdicts from absolute grades: the deciding grades of A and B
    tie_rounds: int = 0  # re-grading rounds used to break a tie of grades
    reason: str | None = None
    """Why ``winner`` is None (a tie, ``"order B-A failed: ..."``, no verdict); None when there is a winner."""

    @property
    def ok(self) -> bool:
        """True when a winner was decided."""
        return self.winner is not None

    @property
    def swap_agreement(self) -> bool | None:
        """With swap=True: did both orders pick the same response? None otherwise."""
        if len(self.order_winners) != 2 or None in self.order_winners:
            return None
        return self.order_winners[0] == self.order_winners[1]


@dataclass
class JudgeStats:
    """Running counters over a judge's lifetime (read them for metrics)."""

    calls: int = 0
    """Judge calls (grade/compare batches, tie rounds included)."""
    items: int = 0
    """Prompts judged (a swapped order counts as one more)."""
    samples: int = 0
    """Samples generated, retries included (not those a judgment store answered: ``stored_samples``)."""
    stored_samples: int = 0
    """Samples a judgment store answered instead of the backend."""
    parse_failures: int = 0  # samples without a verdict
    retries: int = 0  # re-sampling rounds, summed over items
    forced: int = 0  # verdicts forced after the format's force_prefix
    truncated: int = 0  # items whose response was shortened to fit the context
    neutralized: int = 0  # template markers rewritten inside responses
    prompt_tokens: int = 0  # sent to the backend (stored_*: what a judgment store answered instead)
    completion_tokens: int = 0
    stored_prompt_tokens: int = 0
    stored_completion_tokens: int = 0
    seconds: float = 0.0  # wall time spent in the backend loop
    counters: dict[str, int] = field(default_factory=dict)
    """A composite judge's own counters by metric name (a cascade's ``cascade_routed`` ...), logged by rewards."""


# -- the outcome of an item that was not judged: a value, never an exception for one item's fault ---------------
def input_failure(error: InputError) -> JudgeFailure:
    """An item's ``InputError`` as its failure (the message without the batch position)."""
    return JudgeFailure("input", _ITEM.sub("", str(error)))


def failed_grade(failure: JudgeFailure) -> Grade:
    """The grade of an item nothing was judged for (its input's fault, or no call answered it)."""
    return Grade(None, error=failure)


def failed_verdict(failure: JudgeFailure, swap: bool = False) -> Verdict:
    """The verdict of a pair nothing was judged for: no winner in its order (both with ``swap``), with the reason."""
    return Verdict(None, error=failure, reason=failure.reason, order_winners=(None, None) if swap else (None,))


R = TypeVar("R", Grade, Verdict)


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
