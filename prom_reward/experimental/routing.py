"""Routing rules of a judge cascade (``route``): which judgments are uncertain enough to send to a second judge,
a share of the run or all above a threshold; failed ones are always routed."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from prom_reward.confidence.indicators import get_indicator
from prom_reward.core.results import Judgment, Verdict
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError


@dataclass(frozen=True)
class CascadeConfig:
    """When items go from the primary to the fallback judge."""

    route_fraction: float | None = setting(
        None, help="Share of the run's items to route (the most uncertain), in [0, 1].", ge=0, le=1
    )
    threshold: float | None = setting(
        None, help="Route every item whose uncertainty under ``indicator`` is above this value."
    )
    indicator: str = setting(
        "se", help="Name of the uncertainty indicator (``confidence.indicators.INDICATORS``).", nonempty=True
    )
    window: int = setting(
        1000, help="Recent uncertainties the running quantile of ``route_fraction`` is taken over.", ge=1
    )

    def __post_init__(self) -> None:
        if (self.route_fraction is None) == (self.threshold is None):
            raise ConfigError(
                f"give exactly one of {{route_fraction}} (a share in [0, 1]) or {{threshold}} (an uncertainty), got "
                f"{self.route_fraction!r} and {self.threshold!r}; fix: give one of them",
                mentions=("route_fraction", "threshold"),
            )
        check(self)
        get_indicator(self.indicator)


@dataclass
class CascadeStats:
    """Running counters of a cascade (read them for cost and routing metrics)."""

    items: int = 0  # judged by the primary
    routed: int = 0  # sent to the fallback
    routed_failed: int = 0  # of those, items whose primary judgment had failed
    unscored: int = 0  # valid primary results without a value for the indicator (routed as most uncertain)
    fallback_failed: int = 0  # routed items the fallback could not judge either
    fallback_calls: int = 0  # one per cascade call that routed anything
    fallback_prompt_tokens: int = 0
    fallback_completion_tokens: int = 0


@dataclass(frozen=True)
class Routing:
    """The routing decision for one item of the last call."""

    uncertainty: float | None  # the primary result's uncertainty under the indicator (None when unknown or failed)
    routed: bool
    reason: str  # ``"failed"``, ``"unscored"``, ``"uncertain"`` (routed) or ``""`` (kept)


def is_failed(result: Judgment) -> bool:
    """True when the judgment failed (no score / winner), a tie not counting as a failure."""
    return not result.ok and not (isinstance(result, Verdict) and result.tie)


def route(results: Sequence[Judgment], config: CascadeConfig, history: Sequence[float] | None = None) -> list[Routing]:
    """Which results to send to the fallback under ``config``: with ``route_fraction`` and no ``history``, the
    ``ceil(f * n)`` most uncertain (failures count in it); with a ``history``, the running-quantile rule."""
    measure = get_indicator(config.indicator)
    values = [None if is_failed(r) or r.confidence is None else measure(r.confidence) for r in results]
    failed = {i for i, r in enumerate(results) if is_failed(r)}
    unscored = {i for i, v in enumerate(values) if v is None and i not in failed}
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    if config.threshold is not None:
        uncertain = {i for i, v in known if v > config.threshold}
    elif history is not None:  # a mid-rank among history + values above 1 - route_fraction
        pool = sorted([*history, *(v for _, v in known)])
        rank = {i: (bisect.bisect_left(pool, v) + bisect.bisect_right(pool, v)) / 2 for i, v in known}
        uncertain = {i for i, r in rank.items() if r / len(pool) > 1 - config.route_fraction}  # type: ignore[operator]
    else:
        budget = math.ceil(config.route_fraction * len(results) - 1e-9)  # type: ignore[operator]
        order = sorted(unscored) + [i for _, i in sorted((-v, i) for i, v in known)]
        picked = order[: max(budget - len(failed), 0)]
        uncertain = set(picked) - unscored
        unscored = unscored & set(picked)
    out = []
    for i, v in enumerate(values):
        reason = "failed" if i in failed else "unscored" if i in unscored else "uncertain" if i in uncertain else ""
        out.append(Routing(uncertainty=v, routed=bool(reason), reason=reason))
    return out
