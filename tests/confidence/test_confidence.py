"""Confidence indicators, exactly, against hand-computed values (scripted backends; real engines in
test_teacher_forcing.py)."""

import math

import pytest

from prom_reward import ConfigError, PrometheusJudge
from prom_reward.backends.base import Completion, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.confidence.indicators import (
    INDICATORS,
    Confidence,
    confidence_from_samples,
    entropy_upper_bound,
    get_indicator,
    mean_entropy,
    mean_nll,
    merge_confidences,
    token_entropy,
    uncertainty,
)
from prom_reward.core.results import JudgeSample

LN = math.log


def pos(token, probs):
    return TokenLogprobs(token, LN(probs[token]), {k: LN(v) for k, v in probs.items()})


# (top-k probabilities, tail entropy, bucket entropy, renormalised entropy), computed by hand
ENTROPY_TABLE = [
    ({"a": 1.0}, 0.0, 0.0, 0.0),
    ({"a": 0.5, "b": 0.5}, LN(2), LN(2), LN(2)),
    # tail 0.25 <= p_min: one outcome in both: -(.5 ln .5 + .25 ln .25 + .25 ln .25) = 1.5 ln 2
    ({"a": 0.5, "b": 0.25}, 1.5 * LN(2), 1.5 * LN(2), -(2 / 3 * LN(2 / 3) + 1 / 3 * LN(1 / 3))),
    # tail 0.4 > p_min 0.3: tail = one outcome of .3 and a remainder of .1; bucket: one outcome of .4
    ({"a": 0.3, "b": 0.3}, -(0.9 * LN(0.3) + 0.1 * LN(0.1)), -(0.6 * LN(0.3) + 0.4 * LN(0.4)), LN(2)),
    ({"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}, LN(4), LN(4), LN(4)),
    # a flat distribution: 100 outcomes of .01, two reported; bucket calls it nearly certain
    ({"a": 0.01, "b": 0.01}, LN(100), -(0.02 * LN(0.01) + 0.98 * LN(0.98)), LN(2)),
]


@pytest.mark.parametrize("probs, tail, bucket, renorm", ENTROPY_TABLE)
def test_token_entropy_all_truncations(probs, tail, bucket, renorm):
    p = pos("a", probs)
    assert token_entropy(p) == pytest.approx(tail, abs=1e-9)
    assert token_entropy(p, "tail") == pytest.approx(tail, abs=1e-9)
    assert token_entropy(p, "bucket") == pytest.approx(bucket, abs=1e-12)
    assert token_entropy(p, "renormalize") == pytest.approx(renorm, abs=1e-12)


def test_tail_and_bucket_are_lower_bounds_tail_the_tighter():
    # true distribution: .3, .3 and a tail of four tokens of .1; only the .3s are reported
    true = -(0.6 * LN(0.3) + 0.4 * LN(0.1))
    reported = pos("a", {"a": 0.3, "b": 0.3})
    bucket, tail = token_entropy(reported, "bucket"), token_entropy(reported, "tail")
    assert bucket < tail < true
    assert tail == pytest.approx(-(0.9 * LN(0.3) + 0.1 * LN(0.1)))
    # when the tail is a single token, the tail bound is exact
    assert token_entropy(pos("a", {"a": 0.5, "b": 0.3}), "tail") == pytest.approx(
        -(0.5 * LN(0.5) + 0.3 * LN(0.3) + 0.2 * LN(0.2))
    )


def test_sampled_token_outside_top_k_does_not_count_and_overfull_mass_is_rescaled():
    # the sampled token "z" is outside the top-1: only the top-1 (.5) and a tail capped at .5 count
    p = TokenLogprobs("z", LN(0.2), {"a": LN(0.5), "z": LN(0.2)})
    assert token_entropy(p, top_k=1) == pytest.approx(LN(2))
    assert token_entropy(p, "bucket", top_k=1) == pytest.approx(LN(2))
    over = TokenLogprobs("a", LN(0.6), {"a": LN(0.6), "b": LN(0.6)})  # rounding made mass 1.2
    assert token_entropy(over) == pytest.approx(LN(2))


def _top20_position(dist, token):
    """What a backend reports: the top-20 of ``dist`` plus the sampled token."""
    top = dict(sorted(dist.items(), key=lambda kv: -kv[1])[:20])
    top.setdefault(token, dist[token])
    return TokenLogprobs(token, LN(dist[token]), {k: LN(v) for k, v in top.items()})


def test_entropy_is_a_function_of_the_distribution_not_of_the_sampled_token():
    # one base distribution: a head of 20 tokens (.6 in all) and 4,000 tail tokens sharing .4 unevenly
    head = {f"h{i}": 0.6 * w for i, w in enumerate(_normalised([20 - i for i in range(20)]))}
    tail = {f"t{i}": 0.4 * w for i, w in enumerate(_normalised([1 + (i % 7) for i in range(4000)]))}
    dist = {**head, **tail}
    true = -sum(p * LN(p) for p in dist.values())
    values = {tok: token_entropy(_top20_position(dist, tok)) for tok in ("h0", "h19", "t0", "t3999")}
    assert len({round(v, 12) for v in values.values()}) == 1  # before issue 14: t0/t3999 gave far more
    assert values["h0"] <= true + 1e-9
    assert entropy_upper_bound(_top20_position(dist, "t0"), len(dist)) >= true - 1e-9
    for t in ("bucket", "renormalize"):
        assert token_entropy(_top20_position(dist, "h0"), t) == pytest.approx(
            token_entropy(_top20_position(dist, "t5"), t)
        )


def _normalised(weights):
    total = sum(weights)
    return [w / total for w in weights]


@pytest.mark.parametrize("sharpness", [1.0, 5.0, 15.0])
def test_top20_estimate_against_full_vocabulary_entropy_of_a_real_model(tiny_model_dir, sharpness):
    import torch

    from prom_reward.backends.base import GenerationRequest, with_continuation
    from prom_reward.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_model_dir)
    try:
        req = GenerationRequest("You are a fair judge.", "Grade this answer: 2 + 2 = 4.")
        ids = backend._ids(with_continuation(req, "The answer is correct and complete. [RESULT] 5"))
        with torch.no_grad():
            logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -12:].float() * sharpness
        logp = logits.double().log_softmax(-1)
        exact = -(logp.exp() * logp).sum(-1)  # full vocabulary, float64
        seen = []
        for row, h in zip(logits, exact.tolist(), strict=True):
            likeliest, unlikeliest = int(row.argmax()), int(row.argmin())
            first = backend._position(likeliest, row, 20)
            last = backend._position(unlikeliest, row, 20)  # added to ``top`` although outside it
            tail = token_entropy(first)
            assert tail == pytest.approx(token_entropy(last), abs=1e-9)
            # the backend's top-k comes from float32 logits: allow for that rounding
            assert token_entropy(first, "bucket") <= tail + 1e-9 <= h * (1 + 1e-4) + 1e-5
            assert h <= entropy_upper_bound(first, row.numel()) * (1 + 1e-4) + 1e-5
            seen.append((h, tail))
        assert max(h for h, _ in seen) > 1e-2  # not only degenerate, certain positions
        if sharpness == 1.0:  # the tiny random model is nearly uniform: the bound is close to log V
            assert all(t > 0.9 * h for h, t in seen)
    finally:
        backend.close()


def test_unknown_truncation_lists_valid_ones():
    with pytest.raises(ConfigError, match="tail, bucket, renormalize"):
        token_entropy(pos("a", {"a": 1.0}), "clip")


def test_mean_entropy_and_nll_over_tokens():
    lps = [pos("a", {"a": 1.0}), pos("a", {"a": 0.5, "b": 0.5}), pos("b", {"a": 0.5, "b": 0.25})]
    assert mean_entropy(lps) == pytest.approx((0 + LN(2) + 1.5 * LN(2)) / 3)
    assert mean_nll(lps) == pytest.approx((0 + LN(2) + LN(4)) / 3)
    assert mean_entropy(None) is None and mean_nll([]) is None


def test_confidence_from_samples_margins():
    samples = [
        JudgeSample("x", "x", 4, probabilities={"4": 0.8, "5": 0.2}, entropy=0.2, nll=0.1, scored_tokens=3),
        JudgeSample("y", "y", 4, probabilities={"4": 0.6, "3": 0.4}, entropy=0.4, nll=0.3, scored_tokens=5),
        # renormalised 0.5, but the labels only had 0.8 of the mass: the token's own probability is 0.4
        JudgeSample(
            "z", "z", 2, probabilities={"2": 0.5, "4": 0.5}, verdict_mass=0.8, entropy=0.6, nll=0.5, scored_tokens=2
        ),
        JudgeSample("no verdict", None, None, entropy=9.0, scored_tokens=50),  # failures do not count
    ]
    c = confidence_from_samples(samples)
    assert c.entropy == pytest.approx(0.4) and c.nll == pytest.approx(0.3) and c.tokens == 10
    assert c.verdict_probability == pytest.approx((0.8 + 0.6 + 0.4) / 3)
    assert c.sample_agreement == pytest.approx(2 / 3)
    assert c.swap_agreement is None and c.base_entropy is None and c.entropy_calibrated is None
    single = confidence_from_samples(samples[:1])
    assert single.sample_agreement is None  # needs two samples


def test_merge_and_calibrated_entropy():
    m = merge_confidences(
        [
            Confidence(entropy=1.0, base_entropy=0.4, tokens=3),
            None,
            Confidence(entropy=0.5, base_entropy=0.2, verdict_probability=0.9, tokens=2),
        ],
        swap_agreement=0.0,
    )
    assert m.entropy == 0.75 and m.base_entropy == pytest.approx(0.3) and m.entropy_calibrated == pytest.approx(0.45)
    assert m.verdict_probability == 0.9 and m.swap_agreement == 0.0 and m.tokens == 5


@pytest.mark.parametrize(
    "name, expected",
    [
        ("se", 0.7),
        ("se_cali", 0.5),
        ("perplexity", 1.1),
        ("verdict_probability", 0.25),
        ("sample_agreement", 1 / 3),
        ("swap_agreement", 1.0),
    ],
)
def test_indicators_are_uncertainties(name, expected):
    c = Confidence(
        entropy=0.7, nll=1.1, base_entropy=0.2, verdict_probability=0.75, sample_agreement=2 / 3, swap_agreement=0.0
    )
    assert uncertainty(c, name) == pytest.approx(expected)


def test_unknown_indicator_lists_valid_names():
    with pytest.raises(ConfigError, match="perplexity, sample_agreement, se, se_cali"):
        get_indicator("entropy")
    assert uncertainty(None, "se") is None and len(INDICATORS.names()) == 6


def completion(text, probs_per_token):
    return Completion(text, tuple(pos(tok, probs) for tok, probs in probs_per_token), "stop", len(probs_per_token))


def test_judge_confidence_requests_logprobs_and_fills_grades():
    out = completion(
        "Fine. [RESULT] 4",
        [("Fine.", {"Fine.": 0.5, "Good.": 0.5}), (" [RESULT] ", {" [RESULT] ": 1.0}), ("4", {"4": 0.75, "5": 0.25})],
    )
    backend = ScriptedBackend(outputs=[out])
    judge = PrometheusJudge(backend=backend, confidence=True)
    assert judge.sampling.logprobs == 20
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert backend.calls[0][0].sampling.logprobs == 20
    c = g.confidence
    assert c.entropy == pytest.approx((LN(2) + 0 + -(0.75 * LN(0.75) + 0.25 * LN(0.25))) / 3)
    assert c.nll == pytest.approx((LN(2) + 0 + -LN(0.75)) / 3)
    assert c.verdict_probability == pytest.approx(0.75) and c.tokens == 3


def test_grade_without_logprobs_still_has_sample_agreement():
    judge = PrometheusJudge(
        backend="scripted", outputs=["a [RESULT] 4", "b [RESULT] 4", "c [RESULT] 2", "d [RESULT] 4"], num_samples=4
    )
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert g.confidence.sample_agreement == 0.75 and g.confidence.entropy is None


def test_verdict_swap_agreement():
    judge = PrometheusJudge(
        backend="scripted",
        outputs=[
            "x [RESULT] A",
            "y [RESULT] B",  # item 0 both orders
            "x [RESULT] A",
            "y [RESULT] A",
        ],
    )
    # batch order: item0, item1 (original), item0, item1 (swapped)
    v = judge.compare(["q0", "q1"], ["a", "a"], ["b", "b"], "helpfulness", swap=True)
    # item 0: A then (swapped) A -> flipped B: disagreement; item 1: B then A -> flipped B: agreement
    assert [x.confidence.swap_agreement for x in v] == [0.0, 1.0]
    assert v[0].tie and v[1].winner == "B"


def test_an_unknown_entropy_truncation_is_refused():
    with pytest.raises(ConfigError, match="entropy_truncation"):
        PrometheusJudge(backend="scripted", outputs=["x"], entropy_truncation="drop")
