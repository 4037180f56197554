"""CascadeJudge routing, cost accounting and reward integration, exactly, on scripted judges."""

import math

import pytest

from prom_reward import ConfigError, PrometheusJudge, PrometheusReward
from prom_reward.backends.base import Completion, TokenLogprobs
from prom_reward.confidence.indicators import Confidence
from prom_reward.core.results import Grade, Verdict
from prom_reward.experimental import CascadeConfig, CascadeJudge, calibrated_judge, route
from tests.judges import Calibrator


def confident(text, p):
    """A one-token scripted output whose token has probability ``p`` (entropy grows as p falls)."""
    return Completion(text, (TokenLogprobs("x", math.log(p), {"x": math.log(p)}),), "stop", 1)


def entropy_of(p):
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def grades(*entropies):
    return [Grade(3.0, confidence=Confidence(entropy=e)) if e is not None else Grade(None) for e in entropies]


@pytest.mark.parametrize(
    "fraction, reasons",
    [
        (0.0, ["", "", "", "", "failed"]),  # failures route even at 0%
        (0.2, ["", "", "", "", "failed"]),  # budget 1 is used by the failure
        (0.4, ["", "uncertain", "", "", "failed"]),
        (0.6, ["", "uncertain", "", "uncertain", "failed"]),
        (1.0, ["uncertain", "uncertain", "uncertain", "uncertain", "failed"]),
    ],
)
def test_route_fraction_table(fraction, reasons):
    out = route(grades(0.1, 0.9, 0.2, 0.5, None), CascadeConfig(route_fraction=fraction))
    assert [r.reason for r in out] == reasons
    assert [r.routed for r in out] == [bool(x) for x in reasons]
    assert [r.uncertainty for r in out] == [0.1, 0.9, 0.2, 0.5, None]


def test_route_threshold_and_unscored_and_ties():
    gs = grades(0.1, 0.9, 0.5) + [Grade(4.0, confidence=Confidence())]  # valid, but no entropy known
    assert [r.reason for r in route(gs, CascadeConfig(threshold=0.5))] == ["", "uncertain", "", "unscored"]
    # with a fraction, unknown uncertainty ranks first
    assert [r.reason for r in route(gs, CascadeConfig(route_fraction=0.5))] == ["", "uncertain", "", "unscored"]
    assert [r.reason for r in route(gs, CascadeConfig(route_fraction=0.25))] == ["", "", "", "unscored"]
    # a tie is a judgment, not a failure
    tie = Verdict(None, tie=True, confidence=Confidence(swap_agreement=0.0))
    assert route([tie], CascadeConfig(threshold=0.5, indicator="swap_agreement"))[0].reason == "uncertain"
    assert route([tie], CascadeConfig(threshold=1.0, indicator="swap_agreement"))[0].reason == ""


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, "exactly one"),
        ({"route_fraction": 0.5, "threshold": 1.0}, "exactly one"),
        ({"route_fraction": 1.5}, r"\[0, 1\]"),
        ({"route_fraction": -0.1}, r"\[0, 1\]"),
        ({"threshold": float("nan")}, "finite"),
        ({"route_fraction": 0.5, "indicator": "entropy"}, "valid names: perplexity, sample_agreement, se, se_cali"),
    ],
)
def test_config_validation(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CascadeConfig(**kwargs)


def test_indicator_needs_are_checked_at_construction():
    plain = PrometheusJudge(backend="scripted", outputs=["x"])
    other = PrometheusJudge(backend="scripted", outputs=["x"])
    with pytest.raises(ConfigError, match="confidence=True"):
        CascadeJudge(plain, other, route_fraction=0.5, indicator="se")
    with pytest.raises(ConfigError, match="calibrated_judge"):
        CascadeJudge(plain, other, route_fraction=0.5, indicator="se_cali")
    with pytest.raises(ConfigError, match="fallback: expected a judge .*subclass of prom_reward.Judge.*, got object"):
        CascadeJudge(plain, object(), route_fraction=0.5, indicator="sample_agreement")
    assert CascadeJudge(plain, other, threshold=0.1, indicator="sample_agreement").indicators[0] == "perplexity"


def make_cascade(primary_outputs, fallback_outputs, **kw):
    primary = PrometheusJudge(backend="scripted", outputs=primary_outputs, confidence=True, max_retries=0)
    fallback = PrometheusJudge(backend="scripted", outputs=fallback_outputs, max_retries=0)
    return CascadeJudge(primary, fallback, **kw), fallback


def test_grade_routes_least_confident_and_failures_with_cost():
    cascade, fallback = make_cascade(
        [
            confident("a [RESULT] 4", 0.95),
            confident("b [RESULT] 2", 0.6),
            confident("c [RESULT] 3", 0.9),
            "no verdict at all",
        ],
        ["fallback one [RESULT] 5", "fallback two [RESULT] 1"],
        route_fraction=0.5,
    )
    out = cascade.grade(["q0", "q1", "q2", "q3"], ["r0", "r1", "r2", "r3"], ["helpfulness"] * 4)
    assert [(g.score, g.decided_by) for g in out] == [
        (4.0, "primary"),
        (5.0, "fallback"),
        (3.0, "primary"),
        (1.0, "fallback"),
    ]
    assert [r.reason for r in cascade.last_routing] == ["", "uncertain", "", "failed"]
    assert cascade.last_routing[1].uncertainty == pytest.approx(entropy_of(0.6))
    # the fallback saw exactly the routed items, in order
    sent = [r.user for r in fallback.backend.calls[0]]
    assert len(sent) == 2 and "\nr1\n" in sent[0] and "\nr3\n" in sent[1]
    st = cascade.cascade_stats
    assert (st.items, st.routed, st.routed_failed, st.fallback_calls) == (4, 2, 1, 1)
    assert st.fallback_completion_tokens == 8 and st.fallback_prompt_tokens == sum(g.prompt_tokens for g in out[1::2])
    assert cascade.stats.completion_tokens == cascade.primary.stats.completion_tokens + 8  # 4 words each


def test_nothing_routed_makes_no_fallback_call_and_fallback_failure_keeps_primary():
    cascade, fallback = make_cascade([confident("a [RESULT] 4", 0.9)], [], threshold=10.0)
    assert [g.decided_by for g in cascade.grade(["q"], ["r"], "helpfulness")] == ["primary"]
    assert cascade.cascade_stats.fallback_calls == 0 and fallback.backend.calls == []
    cascade, _ = make_cascade(
        [confident("a [RESULT] 4", 0.6), "nothing"], ["still nothing", "also nothing"], route_fraction=1.0
    )
    kept, failed = cascade.grade(["q", "q2"], ["r", "r2"], "helpfulness")
    assert (kept.score, kept.decided_by) == (4.0, "primary")  # fallback failed: primary's valid grade stays
    assert (failed.score, failed.decided_by) == (None, "fallback")
    assert cascade.cascade_stats.fallback_failed == 2


def test_compare_routes_by_swap_agreement():
    primary = PrometheusJudge(backend="scripted", outputs=["[RESULT] A", "[RESULT] A", "[RESULT] B", "[RESULT] B"])
    fallback = PrometheusJudge(backend="scripted", outputs=["[RESULT] B", "[RESULT] A"])
    cascade = CascadeJudge(primary, fallback, threshold=0.5, indicator="swap_agreement")
    # item 0: A, swapped B -> agree on A; item 1: A, swapped B... see order: originals first
    v = cascade.compare(["q0", "q1"], ["a0", "a1"], ["b0", "b1"], "helpfulness", swap=True)
    # originals: item0 A, item1 A; swapped: item0 B (= A), item1 B (= A): both agree, nothing routed
    assert [(x.winner, x.decided_by) for x in v] == [("A", "primary"), ("A", "primary")]
    primary2 = PrometheusJudge(backend="scripted", outputs=["[RESULT] A", "[RESULT] A", "[RESULT] B", "[RESULT] A"])
    cascade2 = CascadeJudge(primary2, fallback, threshold=0.5, indicator="swap_agreement")
    v2 = cascade2.compare(["q0", "q1"], ["a0", "a1"], ["b0", "b1"], "helpfulness", swap=True)
    # item 1 disagreed (A, then swapped A = B): a tie, routed; fallback says B then (swapped) A = B
    assert [(x.winner, x.decided_by) for x in v2] == [("A", "primary"), ("B", "fallback")]
    assert fallback.backend.calls[0][0].user.count("\na1\n") == 1 and len(fallback.backend.calls[0]) == 2


def test_reward_uses_whoever_decided_and_logs_it():
    cascade, _ = make_cascade(
        [confident("a [RESULT] 4", 0.95), confident("b [RESULT] 2", 0.55), confident("c [RESULT] 3", 0.99)],
        ["better judge [RESULT] 5"],
        route_fraction=0.5,
    )
    reward = PrometheusReward(cascade, rubric="helpfulness")
    metrics, extra = {}, {}
    rewards = reward(["q0", "q1"], ["r0", "r1"], log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    assert rewards == [4.0, 5.0]
    assert extra["prometheus_judge"] == ["primary", "fallback"]
    assert extra["prometheus_feedback"] == ["a", "better judge"]
    assert metrics["prometheus/cascade_items"] == 2.0 and metrics["prometheus/cascade_routed"] == 1.0
    assert metrics["prometheus/cascade_fallback_calls"] == 1.0
    assert metrics["prometheus/cascade_fallback_completion_tokens"] == 4.0  # 4 scripted words
    reward(["q2"], ["r2"], log_metric=metrics.__setitem__)  # each batch logs its own change of the counters
    assert metrics["prometheus/cascade_items"] == 1.0 and metrics["prometheus/cascade_routed"] == 0.0  # the surest


def test_the_cascade_reports_its_routing_through_its_stats():
    cascade, fallback = make_cascade([confident("a [RESULT] 4", 0.95), confident("b [RESULT] 2", 0.55)],
                                     ["fb [RESULT] 5"], route_fraction=0.5)  # fmt: skip
    assert cascade.stats.counters == {f"cascade_{k}": 0 for k in vars(cascade.cascade_stats)}
    cascade.grade(["q0", "q1"], ["r0", "r1"], "helpfulness")
    counters = cascade.stats.counters
    assert (counters["cascade_items"], counters["cascade_routed"], counters["cascade_fallback_calls"]) == (2, 1, 1)
    assert cascade.stats.items == 3 and fallback.stats.counters == {}  # both judges' items; a judge counts nothing


def test_the_framework_paths_log_a_cascades_counters_with_every_sample():
    from prom_reward.integrations.batched_reward import BatchedReward
    from prom_reward.rewards.samples import RewardSample

    cascade, _ = make_cascade(
        [confident("a [RESULT] 4", 0.95), confident("b [RESULT] 2", 0.55)], ["fb [RESULT] 5"], route_fraction=0.5
    )
    br = BatchedReward(PrometheusReward(cascade, rubric="helpfulness"), max_wait_s=0.5)
    out = br.score([RewardSample(prompt="q0", response="r0"), RewardSample(prompt="q1", response="r1")])
    br.close()
    assert [r.reward for r in out] == [4.0, 5.0]
    assert {"cascade_items", "cascade_routed", "cascade_fallback_calls"} <= set(br.extra_log_keys)
    assert all(tuple(r.extra_logs()) == br.extra_log_keys for r in out)
    assert [(r.metrics["cascade_items"], r.metrics["cascade_routed"]) for r in out] == [(2.0, 1.0)] * 2


def test_reward_with_cascade_pickles_unless_an_engine_is_inside():
    import pickle

    from prom_reward import PromRewardError

    cascade, _ = make_cascade([confident("a [RESULT] 4", 0.9)], [], threshold=5.0)
    reward = PrometheusReward(cascade, rubric="helpfulness")
    assert pickle.loads(pickle.dumps(reward))(["q"], ["r"]) == [4.0]

    class FakeEngine:
        name = "vllm"

    cascade.fallback.backend = FakeEngine()
    with pytest.raises(PromRewardError, match="in-process vLLM engine"):
        pickle.dumps(PrometheusReward(cascade, rubric="helpfulness"))


# ---- the routed share over a run, whatever the call sizes (issue 14) ------------------------------


def _run(call_size, fraction, n=1000, seed=0, extra=0):
    import random

    rng = random.Random(seed)
    outputs = [confident("ok [RESULT] 4", rng.uniform(0.5, 0.999)) for _ in range(n + extra)]
    cascade, _ = make_cascade(outputs, ["fb [RESULT] 5"] * (n + extra), route_fraction=fraction)
    done = 0
    while done < n:
        size = min(call_size, n - done)
        cascade.grade(["q"] * size, ["r"] * size, "helpfulness")
        done += size
    return cascade


@pytest.mark.parametrize("fraction", [0.5, 0.2])
@pytest.mark.parametrize("call_size", [1, 7, 64])
def test_routed_share_over_a_run_converges_whatever_the_call_size(call_size, fraction):
    # before: ceil(f * n) per call routed 1 of 1 at every one-item call (a share of 1.0, not 0.5)
    st = _run(call_size, fraction).cascade_stats
    assert st.items == 1000 and abs(st.routed / 1000 - fraction) <= 0.03


def test_calibrated_threshold_routes_the_target_share():
    import random

    rng = random.Random(1)
    calibration = [entropy_of(rng.uniform(0.5, 0.999)) for _ in range(2000)]
    cascade = _run(1, 0.3, seed=2, extra=500)
    t = cascade.calibrate(calibration)
    assert cascade.config.threshold == t and cascade.config.route_fraction is None
    assert sum(v > t for v in calibration) == 600
    before = cascade.cascade_stats.routed
    for _ in range(500):  # fresh items of the same distribution, one per call
        cascade.grade(["q"], ["r"], "helpfulness")
    assert abs((cascade.cascade_stats.routed - before) / 500 - 0.3) <= 0.05
    with pytest.raises(ConfigError, match="route_fraction"):
        cascade.calibrate(calibration)  # already a threshold


def test_indicator_defaults_to_se_cali_with_a_calibration_model():
    plain = PrometheusJudge(backend="scripted", outputs=["[RESULT] 3"], confidence=True)
    assert CascadeJudge(plain, plain, route_fraction=0.1).config.indicator == "se"
    calibrated = calibrated_judge(backend="scripted", outputs=["[RESULT] 3"], base=Calibrator({"t": 1.0}))
    assert CascadeJudge(calibrated, plain, route_fraction=0.1).config.indicator == "se_cali"
    assert CascadeJudge(calibrated, plain, route_fraction=0.1, indicator="se").config.indicator == "se"


def test_the_docs_code_blocks_compile_and_import_what_the_package_exports():
    import re
    from pathlib import Path

    import prom_reward.experimental as experimental

    text = (Path(__file__).resolve().parents[2] / "docs" / "experimental.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 4
    for i, block in enumerate(blocks):
        compile(block, f"docs/experimental.md block {i}", "exec")
    lines = re.findall(r"from prom_reward\.experimental import (.+)", text)
    imported = {name.strip() for line in lines for name in line.split(",")}
    assert imported and imported <= set(experimental.__all__)
