"""The judge end to end over the other backends: a real vLLM OpenAI server and transformers."""

from __future__ import annotations

import asyncio

import pytest

from prom_reward import GradeItem, PrometheusJudge

pytestmark = pytest.mark.integration

QUESTIONS = ["What is the capital of France?", "Name a prime number bigger than 10."]
ANSWERS = ["The capital of France is Paris.", "13 is a prime number bigger than 10."]


def test_server_judge_retries_then_none_on_random_model(vllm_server):
    judge = PrometheusJudge(backend="openai", base_url=vllm_server, sampling={"max_tokens": 8}, max_retries=1)
    grades = judge.grade(QUESTIONS, ANSWERS, "helpfulness", ["Paris", None])
    assert [g.score for g in grades] == [None, None]
    assert all(g.retries == 1 and g.failures == 2 and g.prompt_tokens > 0 for g in grades)
    # the same items, built by hand, take the same path: the same prompts, the same outcomes
    items = [GradeItem(q, a, "helpfulness", ref) for q, a, ref in zip(QUESTIONS, ANSWERS, ["Paris", None], strict=True)]
    again = judge.grade_items(items)
    assert [(g.score, g.retries, g.failures, g.error.kind) for g in again] == [(None, 1, 2, "output")] * 2
    assert [g.prompt_tokens for g in again] == [g.prompt_tokens for g in grades]
    judge.close()


@pytest.mark.smollm2
def test_server_judge_forced_verdicts_with_logprobs(smollm2_server):
    judge = PrometheusJudge(
        backend="openai",
        base_url=smollm2_server,
        sampling={"max_tokens": 16},
        force_verdict="always",
        expected_score=True,
        max_retries=1,
    )
    grades = judge.grade(QUESTIONS, ANSWERS, "helpfulness")
    for g in grades:
        assert g.ok and 1 <= g.score <= 5 and 1 <= g.expected_score <= 5
        assert abs(sum(g.probabilities.values()) - 1) < 1e-6
    (v,) = judge.compare(QUESTIONS[:1], ANSWERS[:1], ["Berlin."], "factual_validity", swap=True)
    assert len(v.order_winners) == 2
    if v.p_a is None:  # SmolLM2 at T=1 sometimes has no A/B in the top-20 even when forced (seen in fresh-clone
        # CI runs, in one order or both): counted as failures, and an order without a verdict decides nothing
        assert v.winner is None and None in v.order_winners and v.failures >= 1 and "no verdict in" in v.reason
    else:
        assert 0 <= v.p_a <= 1
    judge.close()


@pytest.mark.smollm2
def test_server_and_engine_render_the_same_prompt(smollm2_server, smollm2_engine):
    """Same wire format through both paths: identical prompt token counts."""
    from prom_reward.backends.base import GenerationRequest
    from prom_reward.backends.openai_server import OpenAIServer

    req = GenerationRequest(system="SYS", user="A judge prompt.")
    server = OpenAIServer(smollm2_server)
    assert asyncio.run(server.acount_tokens([req])) == asyncio.run(smollm2_engine.acount_tokens([req]))
    server.close()


def test_transformers_judge_on_tiny_model(tiny_model_dir):
    judge = PrometheusJudge(str(tiny_model_dir), backend="transformers", sampling={"max_tokens": 6}, max_retries=0)
    (g,) = judge.grade(QUESTIONS[:1], ANSWERS[:1], "helpfulness")
    assert g.score is None and g.failures == 1 and len(g.raw_outputs) == 1
