"""``CascadeJudge``: judge everything with a cheap judge, send its least confident items to a better one.

The primary judge (e.g. a small fine-tuned judge on vLLM, with ``confidence=True``)
judges the whole batch. Each result's uncertainty under an indicator of
``prom_reward.confidence`` (``se``, ``se_cali``, ``perplexity``, ``verdict_probability``,
``sample_agreement``, ``swap_agreement``) decides what goes to the fallback judge (a
bigger vLLM judge, an OpenAI-compatible API, any object with ``grade``/``compare``):

- ``route_fraction=f``: the least confident share ``f`` *of the run*, not of each call (CascadedEval
  allocates the least confident fraction of a whole set; a per-call ``ceil(f * n)`` would route
  every item of a one-item call). An item is routed when its uncertainty is above a threshold
  calibrated to ``f``: the one set by ``calibrate(uncertainties)`` on a calibration set, else a
  running quantile: its mid-rank among the last ``window`` items' uncertainties and this call's
  is above ``1 - f``. The routed share over a run converges to ``f`` whatever the call sizes;
  ``route(results, config)`` without a history keeps the exact per-set allocation (evaluation);
- ``threshold=t``: every item whose uncertainty is above ``t``.

The indicator defaults to ``se_cali`` when the primary has a calibration (base) model, as in
CascadedEval, and to ``se`` otherwise.

Items whose primary judgment failed (score/winner None, not a tie) always go to the
fallback (on top of the fraction), and so do valid items without
a value for the indicator (ranked as the most uncertain). Each returned result says who
decided (``decided_by``: ``"primary"``/``"fallback"``); ``last_routing`` holds each item's
uncertainty and why it was routed, ``cascade_stats`` the running cost (fallback calls,
items, tokens). When the fallback fails on an item the primary's valid result is kept.
Exposes ``grade``/``compare``/``compare_by_grades``, ``sampling`` and ``stats`` like
``PrometheusJudge``, so it drops into ``PrometheusReward``.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.backends.base import Completion, TokenLogprobs
    >>> def out(text, p):  # a scripted judge whose single token has probability p
    ...     return Completion(text, (TokenLogprobs("x", math.log(p), {"x": math.log(p)}),))
    >>> primary = PrometheusJudge(backend="scripted", outputs=[out("Fine. [RESULT] 4", 0.9),
    ...                           out("Hmm. [RESULT] 2", 0.3)], confidence=True)
    >>> fallback = PrometheusJudge(backend="scripted", outputs=["Good. [RESULT] 5"])
    >>> cascade = CascadeJudge(primary, fallback, route_fraction=0.5, indicator="se")
    >>> [(g.score, g.decided_by) for g in cascade.grade(["q1", "q2"], ["a", "b"], "helpfulness")]
    [(4.0, 'primary'), (5.0, 'fallback')]
    >>> cascade.cascade_stats.routed, cascade.cascade_stats.fallback_calls
    (1, 1)
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from .confidence import INDICATORS, NEEDS, get_indicator
from .errors import ConfigError

R = TypeVar("R")


@dataclass(frozen=True)
class CascadeConfig:
    """When items go from the primary to the fallback judge."""

    route_fraction: float | None = None
    """Share of the run's items to route (the most uncertain), in [0, 1]."""

    threshold: float | None = None
    """Route every item whose uncertainty under ``indicator`` is above this value."""

    indicator: str = "se"
    """Name of the uncertainty indicator (see ``prom_reward.confidence.INDICATORS``)."""

    window: int = 1000
    """``route_fraction`` without a calibration set: how many recent uncertainties the running
    quantile is taken over."""

    def __post_init__(self) -> None:
        if (self.route_fraction is None) == (self.threshold is None):
            raise ConfigError("CascadeJudge: give exactly one of route_fraction=<share in [0, 1]> or "
                              f"threshold=<uncertainty>, got route_fraction={self.route_fraction!r}, "
                              f"threshold={self.threshold!r}")
        f = self.route_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1):
            raise ConfigError(f"route_fraction: expected a number in [0, 1], got {f!r}")
        t = self.threshold
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)):
            raise ConfigError(f"threshold: expected a finite number, got {t!r}")
        w = self.window
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ConfigError(f"window: expected an int >= 1 (recent items for the running quantile), got {w!r}")
        get_indicator(self.indicator)


def _above_running_quantile(values: Sequence[float | None], history: Sequence[float],
                            fraction: float) -> set[int]:
    """Indexes whose mid-rank among ``history`` + ``values`` is above ``1 - fraction``.

    For exchangeable uncertainties the mid-rank is uniform, so each item is routed with
    probability ``fraction`` however few items came before it.
    """
    pool = sorted([*history, *(v for v in values if v is not None)])
    out = set()
    for i, v in enumerate(values):
        if v is None:
            continue
        below, upto = bisect.bisect_left(pool, v), bisect.bisect_right(pool, v)
        if (below + upto) / 2 / len(pool) > 1 - fraction:
            out.add(i)
    return out


@dataclass
class CascadeStats:
    """Running counters of a cascade (read them for cost and routing metrics)."""

    items: int = 0
    """Items judged by the primary."""
    routed: int = 0
    """Items sent to the fallback."""
    routed_failed: int = 0
    """Of those, items whose primary judgment had failed."""
    unscored: int = 0
    """Valid primary results without a value for the indicator (routed as most uncertain)."""
    fallback_failed: int = 0
    """Routed items the fallback could not judge either."""
    fallback_calls: int = 0
    """Calls made to the fallback judge (one per cascade call that routed anything)."""
    fallback_prompt_tokens: int = 0
    """Prompt tokens the fallback was sent."""
    fallback_completion_tokens: int = 0
    """Tokens the fallback generated."""


@dataclass(frozen=True)
class Routing:
    """The routing decision for one item of the last call."""

    uncertainty: float | None
    """The primary result's uncertainty under the indicator (None when unknown or failed)."""
    routed: bool
    """True when the item went to the fallback."""
    reason: str
    """``"failed"``, ``"unscored"``, ``"uncertain"`` (routed) or ``""`` (kept)."""


def _failed(result: Any) -> bool:
    return not result.ok and not getattr(result, "tie", False)


def route(results: Sequence[Any], config: CascadeConfig, history: Sequence[float] | None = None) -> list[Routing]:
    """Which results to send to the fallback under ``config`` (see the module docstring).

    With ``route_fraction`` and no ``history``: the ``ceil(f * n)`` most uncertain of ``results``
    (the exact share of one whole set; failures count in it). With a ``history`` of recent
    uncertainties: the running-quantile rule ``CascadeJudge`` uses (failures on top).

    >>> from prom_reward.results import Grade
    >>> from prom_reward.confidence import Confidence
    >>> gs = [Grade(4.0, confidence=Confidence(entropy=e)) for e in (0.1, 0.9, 0.5)] + [Grade(None)]
    >>> [r.reason for r in route(gs, CascadeConfig(route_fraction=0.5))]
    ['', 'uncertain', '', 'failed']
    >>> [r.routed for r in route(gs[:1], CascadeConfig(route_fraction=0.5), history=[0.2, 0.3, 0.4])]
    [False]
    """
    measure = get_indicator(config.indicator)
    values = [None if _failed(r) or r.confidence is None else measure(r.confidence) for r in results]
    failed = {i for i, r in enumerate(results) if _failed(r)}
    unscored = {i for i, v in enumerate(values) if v is None and i not in failed}
    if config.threshold is not None:
        uncertain = {i for i, v in enumerate(values) if v is not None and v > config.threshold}
    elif history is not None:
        uncertain = _above_running_quantile(values, history, config.route_fraction)  # type: ignore[arg-type]
    else:
        budget = math.ceil(config.route_fraction * len(results) - 1e-9)  # type: ignore[operator]
        order = sorted(unscored) + sorted((i for i, v in enumerate(values) if v is not None),
                       key=lambda i: (-values[i], i))  # type: ignore[operator]
        picked = order[:max(budget - len(failed), 0)]
        uncertain = set(picked) - unscored
        unscored = unscored & set(picked)
    out = []
    for i, v in enumerate(values):
        reason = ("failed" if i in failed else "unscored" if i in unscored else
                  "uncertain" if i in uncertain else "")
        out.append(Routing(uncertainty=v, routed=bool(reason), reason=reason))
    return out


def _subset(value: Any, idx: list[int], n: int) -> Any:
    """Per-item lists are cut down to ``idx``; a single value (one rubric for all) is kept."""
    if isinstance(value, (list, tuple)) and len(value) == n:
        return [value[i] for i in idx]
    return value


class CascadeJudge:
    """Primary judge for everything, fallback judge for the least confident items.

    Args:
        primary: a ``PrometheusJudge`` (with ``confidence=True`` for logprob indicators,
            ``calibration=`` for ``se_cali``) or any object with ``grade``/``compare``.
        fallback: the judge for routed items (any backend; results keep their own confidence).
        route_fraction, threshold, indicator, window: see ``CascadeConfig`` (exactly one of the first
            two). ``indicator=None`` (default): ``se_cali`` when the primary has a calibration model,
            else ``se``.
    """

    def __init__(self, primary: Any, fallback: Any, *, route_fraction: float | None = None,
                 threshold: float | None = None, indicator: str | None = None, window: int = 1000) -> None:
        if indicator is None:
            indicator = "se_cali" if getattr(primary, "calibration", None) is not None else "se"
        self.config = CascadeConfig(route_fraction=route_fraction, threshold=threshold, indicator=indicator,
                                    window=window)
        for role, judge in (("primary", primary), ("fallback", fallback)):
            if not (hasattr(judge, "grade") and hasattr(judge, "compare")):
                raise ConfigError(f"{role}: expected a judge with grade() and compare() (a PrometheusJudge), "
                                  f"got {type(judge).__name__}")
        need = NEEDS[indicator.lower()]
        if need == "logprobs" and getattr(primary, "confidence", True) is False:
            raise ConfigError(f"indicator {indicator!r} reads token logprobs: build the primary judge with "
                              "PrometheusJudge(..., confidence=True)")
        if need == "calibration" and getattr(primary, "calibration", True) is None:
            raise ConfigError("indicator 'se_cali' needs a base model: build the primary judge with "
                              "PrometheusJudge(..., calibration=<base backend>)")
        self.primary, self.fallback = primary, fallback
        self.cascade_stats = CascadeStats()
        self.last_routing: list[Routing] = []
        self.history: deque[float] = deque(maxlen=window)
        """Recent uncertainties (the running quantile of ``route_fraction``)."""

    def calibrate(self, uncertainties: Sequence[float | None]) -> float:
        """Fix the routing threshold from a calibration set's uncertainties under the indicator: the
        ``1 - route_fraction`` quantile, so that share of items like these is routed. Returns it.

        >>> from prom_reward import PrometheusJudge
        >>> judge = PrometheusJudge(backend="scripted", outputs=["[RESULT] 3"], confidence=True)
        >>> CascadeJudge(judge, judge, route_fraction=0.25).calibrate([0.1, 0.2, 0.3, 0.4])
        0.3
        """
        f = self.config.route_fraction
        known = sorted(v for v in uncertainties if v is not None)
        if f is None or not known:
            raise ConfigError("calibrate: expected route_fraction=<share> and at least one known uncertainty, "
                              f"got route_fraction={f!r} and {len(known)} known values")
        cut = min(max(math.ceil((1 - f) * len(known) - 1e-9), 1), len(known)) - 1
        threshold = known[cut]
        self.config = dataclasses.replace(self.config, route_fraction=None, threshold=threshold)
        return threshold

    @property
    def indicators(self) -> list[str]:
        """Valid indicator names."""
        return INDICATORS.names()

    @property
    def sampling(self) -> Any:
        """The primary judge's sampling options (what reward modes inspect)."""
        return self.primary.sampling

    @property
    def stats(self) -> Any:
        """Both judges' ``JudgeStats`` summed (a fresh object on each read)."""
        from .judge import JudgeStats

        total = JudgeStats()
        for judge in (self.primary, self.fallback):
            s = getattr(judge, "stats", None)
            if s is None:
                continue
            for f in dataclasses.fields(total):
                setattr(total, f.name, getattr(total, f.name) + getattr(s, f.name, 0))
        return total

    def _cascade(self, results: list[R], n: int, call: Callable[[list[int]], list[R]]) -> list[R]:
        running = self.config.route_fraction is not None
        routing = route(results, self.config, history=self.history if running else None)
        self.history.extend(r.uncertainty for r in routing if r.uncertainty is not None)
        self.last_routing = routing
        st = self.cascade_stats
        st.items += n
        idx = [i for i, r in enumerate(routing) if r.routed]
        st.routed += len(idx)
        st.routed_failed += sum(r.reason == "failed" for r in routing)
        st.unscored += sum(r.reason == "unscored" for r in routing)
        out = [dataclasses.replace(r, decided_by="primary") for r in results]  # type: ignore[type-var]
        if not idx:
            return out
        st.fallback_calls += 1
        second = call(idx)
        for i, r in zip(idx, second):
            st.fallback_prompt_tokens += getattr(r, "prompt_tokens", 0)
            st.fallback_completion_tokens += getattr(r, "completion_tokens", 0)
            if _failed(r):
                st.fallback_failed += 1
                if not _failed(results[i]):
                    continue  # keep the primary's valid judgment
            out[i] = dataclasses.replace(r, decided_by="fallback")  # type: ignore[type-var]
        return out

    # -- the judge API -----------------------------------------------------------------
    def grade(self, instructions: Sequence[str], responses: Sequence[str], rubric: Any,
              reference_answers: Sequence[str | None] | None = None, **options: Any) -> list[Any]:
        """Like ``PrometheusJudge.grade`` (options such as ``num_samples``/``sampling`` go to both judges)."""
        first = self.primary.grade(instructions, responses, rubric, reference_answers, **options)
        n = len(first)

        def again(idx: list[int]) -> list[Any]:
            return self.fallback.grade(_subset(instructions, idx, n), _subset(responses, idx, n),
                                       _subset(rubric, idx, n), _subset(reference_answers, idx, n), **options)

        return self._cascade(first, n, again)

    def compare(self, instructions: Sequence[str], responses_a: Sequence[str], responses_b: Sequence[str],
                rubric: Any, reference_answers: Sequence[str | None] | None = None, **options: Any) -> list[Any]:
        """Like ``PrometheusJudge.compare`` (``swap``, ``num_samples``, ``sampling`` go to both judges)."""
        first = self.primary.compare(instructions, responses_a, responses_b, rubric, reference_answers, **options)
        n = len(first)

        def again(idx: list[int]) -> list[Any]:
            return self.fallback.compare(_subset(instructions, idx, n), _subset(responses_a, idx, n),
                                         _subset(responses_b, idx, n), _subset(rubric, idx, n),
                                         _subset(reference_answers, idx, n), **options)

        return self._cascade(first, n, again)

    def compare_by_grades(self, instructions: Sequence[str], responses_a: Sequence[str],
                          responses_b: Sequence[str], rubric: Any,
                          reference_answers: Sequence[str | None] | None = None, **options: Any) -> list[Any]:
        """Like ``PrometheusJudge.compare_by_grades``; a pair is routed as a whole."""
        first = self.primary.compare_by_grades(instructions, responses_a, responses_b, rubric,
                                               reference_answers, **options)
        n = len(first)

        def again(idx: list[int]) -> list[Any]:
            return self.fallback.compare_by_grades(
                _subset(instructions, idx, n), _subset(responses_a, idx, n), _subset(responses_b, idx, n),
                _subset(rubric, idx, n), _subset(reference_answers, idx, n), **options)

        return self._cascade(first, n, again)

    def close(self) -> None:
        """Close both judges."""
        try:
            self.primary.close()
        finally:
            self.fallback.close()

    def __enter__(self) -> "CascadeJudge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
