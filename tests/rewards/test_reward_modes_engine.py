"""The pairwise reward modes on a real judge (the crossing matrix's engine cells of ``PrometheusReward`` and
``AsyncPrometheusReward`` in ``pairwise_group`` and ``pairwise_reference``, ``tests/crossings/engine_cells.py``):
two completions against the session's vLLM server on the tiny model, a few tokens each. The tiny random model
rarely writes a verdict: a reward is a win rate in [0, 1] or None with its reason, never a made-up number."""

from __future__ import annotations

import asyncio

import pytest

from prom_reward.core.judge import PrometheusJudge
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("cls", [PrometheusReward, AsyncPrometheusReward])
@pytest.mark.parametrize("mode", ["pairwise_group", "pairwise_reference"])
def test_a_pairwise_mode_rewards_from_a_real_judge(cls, mode, vllm_server):
    judge = PrometheusJudge(backend="openai", base_url=vllm_server, sampling={"max_tokens": 8}, max_retries=0)
    reward = cls(judge, mode=mode, rubric="helpfulness")
    columns = {"baseline": ["A plain answer."] * 2} if mode == "pairwise_reference" else {}
    extra: dict[str, list] = {}
    try:
        got = reward(
            prompts=["Say hi."] * 2, completions=["Hi!", "Hello there."], log_extra=extra.__setitem__, **columns
        )
        rewards = asyncio.run(got) if cls is AsyncPrometheusReward else got
    finally:
        reward.close()
    assert len(rewards) == 2 and judge.stats.calls >= 1  # the real judge was asked
    assert all(r is None or 0.0 <= r <= 1.0 for r in rewards), rewards
    reasons = extra.get("prometheus_failure_reason", ["", ""])
    assert all((r is None) == bool(why) for r, why in zip(rewards, reasons, strict=True)), (rewards, reasons)
