"""``ChecklistConfig``: how a checklist is judged and aggregated (explicit or implicit, which aggregation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.aggregate import get_aggregation
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, UnknownNameError

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
