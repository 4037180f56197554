"""Aggregations of a checklist's per-criterion scores on [0, 1] into one reward (``weighted_mean``, ``minimum``,
``gate`` or a callable; docs/checklists.md; an essential criterion left unjudged makes it None), and
``ChecklistConfig``: how a checklist is judged and aggregated (explicit or implicit, which aggregation)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.criteria import Criterion, satisfied
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, UnknownNameError
from prom_reward.registry import Registry


@dataclass(frozen=True)
class CriterionScore:
    """One criterion's judgment for one response: ``score`` on [0, 1] (a pitfall's: how far the response falls
    into it; None, with its ``reason``, when not judged), ``raw`` on the judge format's own scale."""

    criterion: Criterion
    score: float | None
    reason: str | None = None
    raw: float | None = None

    @property
    def satisfied(self) -> bool | None:
        """Whether the criterion holds (for a pitfall: whether the response fell into it); None if not judged."""
        return None if self.score is None else satisfied(self.score)


@dataclass(frozen=True)
class Aggregate:
    """A checklist's reward for one response: ``value`` (None, with its ``reason``, when an essential criterion or
    every one went unjudged); ``dropped``: non-essential criteria left out, unjudged."""

    value: float | None
    reason: str | None = None
    dropped: int = 0


Aggregation = Callable[[Sequence[CriterionScore]], "float | None"]


def weighted_mean(scores: Sequence[CriterionScore]) -> float:
    """``(sum_Q w s - sum_P w s) / sum_Q w`` (Q: not pitfalls, P: pitfalls); pitfalls only: ``1 - sum_P w s /
    sum_P w``."""
    gain = sum(x.criterion.weight * (x.score or 0.0) for x in scores if not x.criterion.pitfall)
    loss = sum(x.criterion.weight * (x.score or 0.0) for x in scores if x.criterion.pitfall)
    positive = sum(x.criterion.weight for x in scores if not x.criterion.pitfall)
    if positive:
        return (gain - loss) / positive
    pitfalls = sum(x.criterion.weight for x in scores)
    return 1.0 - loss / pitfalls if pitfalls else 1.0


def minimum(scores: Sequence[CriterionScore]) -> float:
    """The weakest criterion: ``min(s for the others, 1 - s for pitfalls)``."""
    return min(1.0 - (x.score or 0.0) if x.criterion.pitfall else (x.score or 0.0) for x in scores)


def gate(scores: Sequence[CriterionScore]) -> float:
    """0 unless every essential criterion is satisfied, else ``weighted_mean`` of the others (or 1)."""
    if any(x.criterion.category == "essential" and not x.satisfied for x in scores):
        return 0.0
    rest = [x for x in scores if x.criterion.category != "essential"]
    return weighted_mean(rest) if rest else 1.0


AGGREGATIONS: Registry[Aggregation] = Registry("checklist aggregation")
for _aggregation in (weighted_mean, minimum, gate):
    AGGREGATIONS.register(_aggregation.__name__, _aggregation)


def get_aggregation(how: str | Aggregation) -> Aggregation:
    """The aggregation named ``how`` (``UnknownNameError`` listing the valid names) or the callable given."""
    if callable(how):
        return how
    if not isinstance(how, str):
        raise ConfigError(
            f"checklist aggregation: expected a name ({', '.join(AGGREGATIONS)}) or a callable, got "
            f"{type(how).__name__}"
        )
    return AGGREGATIONS.get(how)


def aggregate(scores: Sequence[CriterionScore], how: str | Aggregation) -> Aggregate:
    """One response's reward from its criteria's scores."""
    for k, x in enumerate(scores):
        if x.score is None and x.criterion.category == "essential":
            why = x.reason or "no verdict"
            return Aggregate(None, f"essential criterion {k} ({x.criterion.text[:60]!r}) could not be judged: {why}")
    judged = [x for x in scores if x.score is not None]
    dropped = len(scores) - len(judged)
    if not judged:
        first = next((x.reason for x in scores if x.reason), "no verdict")
        return Aggregate(None, f"no criterion of the checklist could be judged: {first}", dropped)
    value = get_aggregation(how)(judged)
    if value is None:
        return Aggregate(None, "the checklist aggregation gave no value", dropped)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return Aggregate(  # a callable's NaN or text would reach the trainer as a reward
            None, f"the checklist aggregation gave {value!r:.60}, not a finite number; fix the aggregation", dropped
        )
    return Aggregate(float(value), None, dropped)


CHECKLIST_MODES = ("explicit", "implicit")
SCORES = ("sample", "mean", "expected")


@dataclass(frozen=True)
class ChecklistConfig:
    """Options of checklist judging (``judging.ajudge_checklists``); validated on construction."""

    mode: str = setting(
        "explicit",
        help="""``explicit``: one judgment per (response, criterion), aggregated; ``implicit``: the whole checklist as
        one rubric, one judgment per response (its score, normalised to [0, 1], is the reward; no aggregation).""",
        choices=CHECKLIST_MODES,
    )
    aggregation: Any = setting(
        "weighted_mean",
        help="Explicit mode: ``weighted_mean``, ``minimum``, ``gate`` or a callable ``f(scores) -> float | None``.",
    )
    score: str = setting(
        "sample",
        help="""Each judgment's score: ``sample`` (one sample), ``mean`` (of ``num_samples``), ``expected`` (the
        verdict-token probabilities' expected score).""",
        choices=SCORES,
    )
    num_samples: int = setting(3, help="Samples per judgment for ``score='mean'``.", ge=1)

    def __post_init__(self) -> None:
        check(self)
        try:
            get_aggregation(self.aggregation)
        except UnknownNameError as e:
            raise ConfigError(str(e), "aggregation") from e


def checklist_config(mode: str, aggregation: Any, score: str = "sample", num_samples: int = 3) -> ChecklistConfig:
    """The ``ChecklistConfig`` of a job's or a reward's ``checklist_*`` settings, an error naming them so."""
    try:
        return ChecklistConfig(mode, aggregation, score, num_samples)
    except ConfigError as e:
        raise e.said_as(f"checklist_{e.setting}" if e.setting in ("mode", "aggregation") else e.setting) from None
