"""Rewards in any judge format (issue 33 item 6): grades normalise on the format's own scale, failure_reward and the
top-score share follow it, the rubric check is the format's, and a model id's preset format reaches the reward."""

from __future__ import annotations

import pytest

from prom_reward import PrometheusJudge
from prom_reward.errors import ConfigError
from prom_reward.integrations.batched_reward import FailurePolicy
from prom_reward.rewards.config import RewardConfig, reward_scale
from prom_reward.rewards.diagnostics import top_of_scale
from prom_reward.rewards.reward import PrometheusReward

THREE = {"criteria": "Is it right?", "descriptions": ["wrong", "partly right", "right"]}
TWO = {"criteria": "Is it right?", "descriptions": ["fail: wrong", "pass: right"]}


def _flow(score: str) -> str:
    return f"<feedback>Checked.</feedback>\n<score>{score}</score>"


@pytest.mark.parametrize(
    ("fmt", "rubric", "scores", "normalize", "rewards", "scale"),
    [
        ("flow-judge-binary", TWO, ("0", "1"), None, [0.0, 1.0], (0.0, 1.0)),
        ("flow-judge-binary", TWO, ("0", "1"), "symmetric", [-1.0, 1.0], (-1.0, 1.0)),
        ("flow-judge-3", THREE, ("1", "2"), "unit", [0.0, 0.5], (0.0, 1.0)),
        ("flow-judge-3", THREE, ("3", "2"), None, [3.0, 2.0], (1.0, 3.0)),
        ("flow-judge", "helpfulness", ("1", "5"), "unit", [0.0, 1.0], (0.0, 1.0)),
        ("prometheus2", "helpfulness", None, "unit", [0.0, 0.75], (0.0, 1.0)),
    ],
)
def test_grades_normalise_on_the_formats_own_scale(fmt, rubric, scores, normalize, rewards, scale):
    outputs = [_flow(s) for s in scores] if scores else ["Poor. [RESULT] 1", "Good. [RESULT] 4"]
    judge = PrometheusJudge(backend="scripted", outputs=outputs, format=fmt)
    reward = PrometheusReward(judge, rubric=rubric, normalize=normalize)
    assert reward(prompts=["Q?", "Q?"], completions=["a", "b"]) == rewards
    assert reward_scale(reward.config) == scale
    assert FailurePolicy("min").value_for(reward.config) == scale[0]
    assert top_of_scale(reward.config) == pytest.approx(scale[1] - (scale[1] - scale[0]) / 8)


def test_failure_reward_above_a_binary_scale_is_refused():
    cfg = RewardConfig(format="flow-judge-binary", rubric=TWO)
    assert FailurePolicy("1").value_for(cfg) == 1.0
    with pytest.raises(ConfigError, match="above the reward's scale 0..1"):
        FailurePolicy("3").value_for(cfg)


def test_the_formats_rubric_check_refuses_a_rubric_for_all_at_construction():
    judge = PrometheusJudge(backend="scripted", outputs=[_flow("1")], format="flow-judge-3")
    with pytest.raises(ConfigError, match="rubric: flow-judge-3 grades need 3 score descriptions"):
        PrometheusReward(judge, rubric="helpfulness")


def test_a_judge_built_from_options_takes_its_models_preset_format():
    reward = PrometheusReward(
        {"backend": "scripted", "outputs": ["x"], "model": "flowaicom/Flow-Judge-v0.1"}, rubric="helpfulness"
    )
    assert reward.judge.format.name == "flow-judge" and reward.config.format == "flow-judge"
    with pytest.raises(ConfigError, match="does not judge absolute"):
        PrometheusReward({"backend": "scripted", "model": "AtlaAI/Selene-1-Mini-Llama-3.1-8B"}, rubric="helpfulness")
