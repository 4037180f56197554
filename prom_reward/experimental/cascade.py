"""``CascadeJudge``: judge everything with a cheap judge, send its least confident items to a better one.

The primary judge (e.g. a small fine-tuned judge on vLLM, with ``confidence=True``)
judges the whole batch. Each result's uncertainty under an indicator of
``prom_reward.confidence.indicators`` (``se``, ``se_cali``, ``perplexity``, ``verdict_probability``,
``sample_agreement``, ``swap_agreement``) decides what goes to the fallback judge (a
bigger vLLM judge, an OpenAI-compatible API, any ``Judge``):

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
items, tokens), which ``stats.counters`` reports too (``cascade_routed`` ...; what rewards log).
When the fallback fails on an item the primary's valid result is kept; an item the list forms cannot build
(``core.protocol.ListForms``) fails in its place (kind ``input``) and goes to neither judge.
Exposes ``grade_items``/``compare_items``, ``grade``/``compare``/``compare_by_grades``, ``sampling`` and ``stats`` like
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

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from prom_reward.backends.bridge import threaded_method
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.confidence.indicators import INDICATORS, NEEDS
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.protocol import CallOptions, Judge, ListForms
from prom_reward.core.results import Grade, JudgeStats, Judgment, Verdict
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.experimental.calibration import reads_base_model
from prom_reward.experimental.routing import CascadeConfig, CascadeStats, Routing, is_failed, route
from prom_reward.format.judge_format import JudgeFormat

R = TypeVar("R", bound=Judgment)
T = TypeVar("T")


class CascadeJudge(ListForms):
    """Primary judge for everything, fallback judge for the least confident items.

    Args:
        primary: a ``PrometheusJudge`` (with ``confidence=True`` for logprob indicators, built by
            ``calibrated_judge`` for ``se_cali``) or any other ``Judge`` (``prom_reward.core.protocol``).
        fallback: the judge for routed items (any backend; results keep their own confidence).
        route_fraction: see ``CascadeConfig`` (exactly one of it and ``threshold``).
        threshold: see ``CascadeConfig``.
        indicator: see ``CascadeConfig``; None (default): ``se_cali`` when the primary has a calibration
            model, else ``se``.
        window: see ``CascadeConfig``.
    """

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
            if not isinstance(judge, Judge):  # the protocol declares what a cascade calls
                raise ConfigError(
                    f"{role}: expected a judge (a PrometheusJudge, or any object implementing the prom_reward.Judge "
                    f"protocol), got {type(judge).__name__}; fix: pass a judge"
                )
        if indicator is None:
            indicator = "se_cali" if reads_base_model(primary) else "se"
        self.config = CascadeConfig(
            route_fraction=route_fraction, threshold=threshold, indicator=indicator, window=window
        )
        need = NEEDS[indicator.lower()]
        if need == "logprobs" and not primary.confidence:
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

    @property
    def sampling(self) -> SamplingConfig:
        """The primary judge's sampling options (what reward modes inspect)."""
        return self.primary.sampling

    @property
    def num_samples(self) -> int:
        """The primary judge's samples per item."""
        return self.primary.num_samples

    @property
    def confidence(self) -> bool:
        """The primary judge's (routing reads its results)."""
        return self.primary.confidence

    @property
    def neutralize_markers(self) -> bool:
        """True when both judges neutralise (each still does so for its own prompts)."""
        return self.primary.neutralize_markers and self.fallback.neutralize_markers

    @property
    def format(self) -> JudgeFormat:
        """The primary judge's (each judge renders and parses its own prompts in its own format)."""
        return self.primary.format

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """Both judges' special tokens (each item may go to either)."""
        return tuple(dict.fromkeys(self.primary.special_tokens + self.fallback.special_tokens))

    @property
    def thread_safe(self) -> bool:
        """False: routing keeps running state (``history``, ``last_routing``)."""
        return False

    @property
    def stats(self) -> JudgeStats:
        """Both judges' ``JudgeStats`` summed (a fresh object on each read), with this cascade's
        ``cascade_stats`` in ``counters`` as ``cascade_<field>`` (beside any counters of the two judges)."""
        total = JudgeStats()
        for judge in (self.primary, self.fallback):
            s = judge.stats
            for f in dataclasses.fields(total):
                if f.name != "counters":
                    setattr(total, f.name, getattr(total, f.name) + getattr(s, f.name))
            for key, value in s.counters.items():
                total.counters[key] = total.counters.get(key, 0) + value
        for key, value in dataclasses.asdict(self.cascade_stats).items():
            total.counters[f"cascade_{key}"] = value
        return total

    def _cascade(self, items: Sequence[T], call: Callable[[Judge, Sequence[T]], list[R]]) -> list[R]:
        """``call`` the primary judge on ``items``, then the fallback on the items routed (``_route``)."""
        return self._route(call(self.primary, items), lambda idx: call(self.fallback, [items[i] for i in idx]))

    def _route(self, results: list[R], again: Callable[[list[int]], list[R]]) -> list[R]:
        """``results`` (the primary's, one per item) with the routed items' judged ``again`` by the fallback (given
        their positions) where it decided, each marked with ``decided_by``; counts in ``cascade_stats``."""
        n = len(results)
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
        out = [dataclasses.replace(r, decided_by="primary") for r in results]
        if not idx:
            return out
        st.fallback_calls += 1
        second = again(idx)
        for i, r in zip(idx, second, strict=True):
            st.fallback_prompt_tokens += r.prompt_tokens
            st.fallback_completion_tokens += r.completion_tokens
            if is_failed(r):
                st.fallback_failed += 1
                if not is_failed(results[i]):
                    continue  # keep the primary's valid judgment
            out[i] = dataclasses.replace(r, decided_by="fallback")
        return out

    # -- the judge API: the item methods (the list forms come from ``core.protocol.ListForms``) --------------
    def grade_items(
        self,
        items: Sequence[GradeItem],
        *,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Grade]:
        """Like ``PrometheusJudge.grade_items`` (the options go to both judges)."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        return self._cascade(items, lambda judge, batch: judge.grade_items(batch, **opts))

    def compare_items(
        self,
        items: Sequence[PairItem],
        *,
        swap: bool = False,
        num_samples: int | None = None,
        sampling: SamplingOverrides = None,
        truncate_response: bool | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """Like ``PrometheusJudge.compare_items`` (the options go to both judges)."""
        opts = CallOptions(
            num_samples=num_samples, sampling=sampling, truncate_response=truncate_response, deadline=deadline
        )
        return self._cascade(items, lambda judge, batch: judge.compare_items(batch, swap=swap, **opts))

    def compare_items_by_grades(
        self,
        items: Sequence[PairItem],
        *,
        max_tie_rounds: int | None = None,
        num_samples: int | None = None,
        deadline: float | None = None,
    ) -> list[Verdict]:
        """Like ``PrometheusJudge.compare_items_by_grades``; a pair is routed as a whole."""
        return self._cascade(
            items,
            lambda judge, batch: judge.compare_items_by_grades(
                batch, max_tie_rounds=max_tie_rounds, num_samples=num_samples, deadline=deadline
            ),
        )

    # the routing is sync: the async forms run it in a worker thread
    agrade_items, acompare_items = threaded_method(grade_items), threaded_method(compare_items)
    acompare_items_by_grades = threaded_method(compare_items_by_grades)

    def __getstate__(self) -> dict[str, object]:
        if any(isinstance(j, PrometheusJudge) and j.backend.name == "vllm" for j in (self.primary, self.fallback)):
            raise PromRewardError(
                "this CascadeJudge holds an in-process vLLM engine, which cannot be pickled (TRL's async GRPO runs "
                "reward functions in a child process); give the cascade judges behind servers: "
                "PrometheusJudge(backend='openai', base_url=...)"
            )
        return dict(self.__dict__)

    def close(self) -> None:
        """Close both judges."""
        try:
            self.primary.close()
        finally:
            self.fallback.close()

    def __enter__(self) -> CascadeJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
