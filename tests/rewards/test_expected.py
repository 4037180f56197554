"""``score="expected"`` on a judge that returns no logprobs: the reward is None with the true reason (the judge
returned no logprobs for the verdict token, and the fix), counted; over a server, refused at its first call."""

from __future__ import annotations

import pytest

from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import JudgeConfigError
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample
from tests.jobs.helpers import judge_server


def test_expected_without_logprobs_says_why():
    judge = PrometheusJudge(backend="scripted", outputs=["Right. [RESULT] 5"], expected_score=True)
    reward = PrometheusReward(judge, score="expected", rubric="helpfulness")
    out = reward.judge_batch([RewardSample("What is 2+2?", "4")])
    assert out.rewards == [None]
    assert out.reasons[0].startswith("the judge returned no logprobs for the verdict token")
    assert "--max-logprobs" in out.reasons[0] and "score='mean'" in out.reasons[0]
    assert out.metrics["no_expected_scores"] == 1.0


def test_expected_over_a_server_without_logprobs_is_refused_at_the_first_call():
    server = judge_server()
    try:
        judge = {"backend": "openai", "base_url": server.url, "model": "judge"}
        reward = PrometheusReward(judge, score="expected", rubric="helpfulness")
        with pytest.raises(JudgeConfigError, match="score='expected': the judge returned no logprobs"):
            reward(prompts=["What is 2+2?"], completions=["4"])
    finally:
        server.stop()
