"""``ChecklistConfig``: how a checklist is judged and aggregated (explicit or implicit, which aggregation).

Example:
    >>> ChecklistConfig(mode="implicit").aggregation
    'weighted_mean'
    >>> ChecklistConfig(mode="both")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: checklist_mode: expected one of explicit, implicit, got 'both'; fix: ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.aggregate import get_aggregation
from prom_reward.errors import ConfigError, UnknownNameError

CHECKLIST_MODES = ("explicit", "implicit")
SCORES = ("sample", "mean", "expected")


@dataclass(frozen=True)
class ChecklistConfig:
    """Options of checklist judging (``judging.ajudge_checklists``); validated on construction."""

    mode: str = "explicit"
    """``explicit``: one judgment per (response, criterion), aggregated; ``implicit``: the whole checklist as one
    rubric, one judgment per response (its score, normalised to [0, 1], is the reward; no aggregation)."""

    aggregation: Any = "weighted_mean"
    """Explicit mode: ``weighted_mean``, ``minimum``, ``gate`` or a callable ``f(scores) -> float | None``
    (``aggregate``)."""

    score: str = "sample"
    """Each judgment's score: ``sample`` (one sample), ``mean`` (of ``num_samples``), ``expected`` (the
    verdict-token probabilities' expected score)."""

    num_samples: int = 3
    """Samples per judgment for ``score="mean"``."""

    def __post_init__(self) -> None:
        if self.mode not in CHECKLIST_MODES:
            raise ConfigError(
                f"checklist_mode: expected one of {', '.join(CHECKLIST_MODES)}, got {self.mode!r}; fix: pick one"
            )
        try:
            get_aggregation(self.aggregation)
        except UnknownNameError as e:
            raise ConfigError(f"checklist_aggregation: {e}") from e
        if self.score not in SCORES:
            raise ConfigError(f"score: expected one of {', '.join(SCORES)}, got {self.score!r}")
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) or self.num_samples < 1:
            raise ConfigError(f"num_samples: expected an int >= 1, got {self.num_samples!r}")
