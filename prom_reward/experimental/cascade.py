"""``CascadeJudge``: judge everything with a cheap judge, send its least confident items (and its failures) to a
better one, as ``route`` decides; the routing rules and counters are in docs/experimental.md."""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, Unpack

from prom_reward.confidence.indicators import INDICATORS, NEEDS, get_indicator
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.protocol import CallOptions, Judge
from prom_reward.core.results import Grade, JudgeStats, Judgment, Verdict
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError
from prom_reward.experimental.calibration import reads_base_model

R = TypeVar("R", bound=Judgment)
T = TypeVar("T")


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


class CascadeJudge(Judge):
    """Primary judge for everything (``confidence=True`` for logprob indicators, ``calibrated_judge`` for
    ``se_cali``), fallback judge (any ``Judge``) for the least confident items; ``route_fraction`` (or
    ``threshold``), ``indicator`` and ``window`` as ``CascadeConfig`` (indicator None: ``se_cali`` when the primary
    has a calibration model, else ``se``)."""

    def __init__(
        self,
        primary: Judge,
        fallback: Judge,
        *,
        route_fraction: float | None = None,
        threshold: float | None = None,
        indicator: str | None = None,
        window: int = 1000,
    ) -> None:
        for role, judge in (("primary", primary), ("fallback", fallback)):
            if not isinstance(judge, Judge):  # the base declares what a cascade calls
                raise ConfigError(
                    "expected a judge (a PrometheusJudge, or any subclass of prom_reward.Judge), "
                    f"got {type(judge).__name__}; fix: pass a judge",
                    role,
                )
        if indicator is None:
            indicator = "se_cali" if reads_base_model(primary) else "se"
        self.config = CascadeConfig(route_fraction, threshold, indicator, window)
        need = NEEDS[indicator.lower()]
        if need == "logprobs" and not primary.capabilities.confidence:
            raise ConfigError(
                f"indicator {indicator!r} reads token logprobs: build the primary judge with "
                "PrometheusJudge(..., confidence=True)"
            )
        if need == "calibration" and not reads_base_model(primary):
            raise ConfigError(
                "indicator 'se_cali' needs a base model reading the primary's outputs: build the primary judge "
                "with prom_reward.experimental.calibrated_judge(..., base=<base backend>)"
            )
        self.primary, self.fallback = primary, fallback
        self.format, self.sampling = primary.format, primary.sampling  # each judge renders its own prompts
        both = primary.capabilities, fallback.capabilities
        self.capabilities = dataclasses.replace(
            both[0],
            neutralize_markers=both[0].neutralize_markers and both[1].neutralize_markers,
            special_tokens=tuple(dict.fromkeys(both[0].special_tokens + both[1].special_tokens)),
            thread_safe=False,  # routing keeps running state (``history``, ``last_routing``)
        )
        self.cascade_stats = CascadeStats()
        self.last_routing: list[Routing] = []
        self.history: deque[float] = deque(maxlen=window)  # recent uncertainties (the running quantile)
        self.stats = self._total()

    def calibrate(self, uncertainties: Sequence[float | None]) -> float:
        """Fix the routing threshold at the ``1 - route_fraction`` quantile of calibration uncertainties."""
        f = self.config.route_fraction
        known = sorted(v for v in uncertainties if v is not None)
        if f is None or not known:
            raise ConfigError(
                "calibrate: expected route_fraction=<share> and at least one known uncertainty, "
                f"got route_fraction={f!r} and {len(known)} known values"
            )
        cut = min(max(math.ceil((1 - f) * len(known) - 1e-9), 1), len(known)) - 1
        threshold = known[cut]
        self.config = dataclasses.replace(self.config, route_fraction=None, threshold=threshold)
        return threshold

    @property
    def indicators(self) -> list[str]:
        """Valid indicator names."""
        return INDICATORS.names()

    def _total(self) -> JudgeStats:
        """Its ``stats``: both judges' summed, with ``cascade_stats`` in ``counters`` as ``cascade_<field>``."""
        total = JudgeStats()
        for s in (self.primary.stats, self.fallback.stats):
            for f in dataclasses.fields(total):
                if f.name != "counters":
                    setattr(total, f.name, getattr(total, f.name) + getattr(s, f.name))
            for key, value in s.counters.items():
                total.counters[key] = total.counters.get(key, 0) + value
        total.counters.update({f"cascade_{k}": v for k, v in dataclasses.asdict(self.cascade_stats).items()})
        return total

    async def _cascade(self, items: Sequence[T], call: Callable[[Judge, Sequence[T]], Awaitable[list[R]]]) -> list[R]:
        """``call`` the primary judge on ``items``, then the fallback on the items routed (``route``, counted in
        ``cascade_stats``); the fallback's judgment replaces the primary's where it decided, marked ``decided_by``."""
        first = await call(self.primary, items)
        running = self.config.route_fraction is not None
        routing = self.last_routing = route(first, self.config, history=self.history if running else None)
        self.history.extend(r.uncertainty for r in routing if r.uncertainty is not None)
        st, idx = self.cascade_stats, [i for i, r in enumerate(routing) if r.routed]
        st.items += len(first)
        st.routed += len(idx)
        st.routed_failed += sum(r.reason == "failed" for r in routing)
        st.unscored += sum(r.reason == "unscored" for r in routing)
        st.fallback_calls += bool(idx)
        second = await call(self.fallback, [items[i] for i in idx]) if idx else []
        out = [dataclasses.replace(r, decided_by="primary") for r in first]
        for i, r in zip(idx, second, strict=True):
            st.fallback_prompt_tokens += r.prompt_tokens
            st.fallback_completion_tokens += r.completion_tokens
            if is_failed(r):
                st.fallback_failed += 1
                if not is_failed(first[i]):
                    continue  # keep the primary's valid judgment
            out[i] = dataclasses.replace(r, decided_by="fallback")
        self.stats = self._total()
        return out

    # -- the item methods (the rest comes from ``core.protocol.Judge``) --------------------------------------
    async def agrade_items(self, items: Sequence[GradeItem], **options: Unpack[CallOptions]) -> list[Grade]:
        """Like ``PrometheusJudge.agrade_items`` (the options go to both judges)."""
        return await self._cascade(items, lambda judge, batch: judge.agrade_items(batch, **options))

    async def acompare_items(
        self, items: Sequence[PairItem], *, swap: bool = False, **options: Unpack[CallOptions]
    ) -> list[Verdict]:
        """Like ``PrometheusJudge.acompare_items`` (the options go to both judges)."""
        return await self._cascade(items, lambda judge, batch: judge.acompare_items(batch, swap=swap, **options))

    def close(self) -> None:
        """Close both judges."""
        try:
            self.primary.close()
        finally:
            self.fallback.close()
