"""``prom_reward.integrations.verl``: verl's custom reward function called directly (settings, failures, counts).

(verl's own code running the reward: test_verl_integration.py.)"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import ConfigError, InputError
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.settings import ENV_PREFIX, RewardSettings, setting_names
from prom_reward.rewards.reward import PrometheusReward


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    prom_verl.reset()
    yield
    prom_verl.reset()


def judge_by_response(table: dict[str, str], seen: list[GenerationRequest]):
    def respond(req: GenerationRequest, i: int) -> str:
        seen.append(req)
        for key, out in table.items():
            if f"###Response to evaluate:\n{key}\n" in req.user:
                return out
        return "no verdict"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)


def test_async_form_uses_question_and_ground_truth():
    seen: list[GenerationRequest] = []
    prom_verl.configure(
        PrometheusReward(judge_by_response({"72": "Right. [RESULT] 5"}, seen), normalize="unit"), failure_reward=0.0
    )
    out = asyncio.run(
        prom_verl.compute_score(
            data_source="gsm8k",
            solution_str="72",
            ground_truth=72,
            extra_info={"question": "How many clips?", "index": 0},
        )
    )
    assert out["score"] == 1.0 and out["judge_reward"] == 1.0 and out["judge_failed"] == 0.0
    assert "###The instruction to evaluate:\nHow many clips?\n" in seen[0].user
    assert "###Reference Answer (Score 5):\n72\n" in seen[0].user


def test_concurrent_calls_failures_get_the_failure_value_and_are_counted(caplog):
    seen: list[GenerationRequest] = []
    prom_verl.configure(
        PrometheusReward(judge_by_response({"good": "[RESULT] 4", "bad": "[RESULT] 2"}, seen)), failure_reward=-1.0
    )
    calls = [
        ("a", "good", None, {"question": "Q1"}),
        ("a", "bad", "", {"prompt": [{"role": "user", "content": "Q2"}]}),
        ("b", "garbled", "x", {"question": "Q3"}),
    ]

    async def score_all():
        return await asyncio.gather(*(prom_verl.compute_score(*c) for c in calls))

    with caplog.at_level(logging.WARNING, logger="prom_reward.integrations.verl"):
        scores = [out["score"] for out in asyncio.run(score_all())]
    assert scores == [4.0, 2.0, -1.0]
    assert prom_verl.stats == {"items": 3, "failures": 1}
    assert "failed on a sample" in caplog.text and "1 of 3 failed so far" in caplog.text
    by = {r.user.split("###Response to evaluate:\n")[1].split("\n")[0]: r.user for r in seen}
    assert "###Reference Answer" not in by["good"] and "###Reference Answer" not in by["bad"]
    assert "###The instruction to evaluate:\nQ2\n" in by["bad"]


def test_failure_value_min_follows_the_scale():
    prom_verl.configure(PrometheusReward(judge_by_response({}, []), normalize="symmetric"), failure_reward="min")
    out = prom_verl.compute_score_sync("a", "x", None, {"question": "q"})
    assert out["score"] == -1.0 and out["judge_failed"] == 1.0 and out["judge_reward"] is None


def test_missing_instruction_and_bad_lengths_raise():
    prom_verl.configure(PrometheusReward(judge_by_response({}, [])), failure_reward=0.0)
    with pytest.raises(InputError, match="extra_info has no 'question'"):
        prom_verl.compute_score_sync("a", "r", None, {"index": 3})


def test_environment_configuration(monkeypatch):
    monkeypatch.setenv("PROM_REWARD_FAILURE_REWARD", "0.0")
    with pytest.raises(ConfigError, match="PROM_REWARD_SERVER"):
        prom_verl.compute_score_sync("a", "r", None, {"question": "q"})
    reward = RewardSettings.load(
        env={
            "PROM_REWARD_SERVER": "http://h1:8000/v1, http://h2:8000/v1",
            "PROM_REWARD_MODE": "pairwise_group",
            "PROM_REWARD_GROUP_SIZE": "4",
            "PROM_REWARD_RUBRIC": "honesty",
            "PROM_REWARD_FAILURE_REWARD": "0",
            "PROM_REWARD_MODEL": "prometheus",
        }
    ).build_reward()
    assert reward.config.mode == "pairwise_group" and reward.config.rubric == "honesty"
    assert reward._judge_spec.kwargs() == {
        "backend": "openai",
        "base_url": ["http://h1:8000/v1", "http://h2:8000/v1"],
        "model": "prometheus",
    }
    prom_verl.configure(PrometheusReward(judge_by_response({}, [])))
    monkeypatch.setenv("PROM_REWARD_FAILURE_REWARD", "nope")
    with pytest.raises(ConfigError, match="failure_reward: expected a number or 'min'"):
        prom_verl.compute_score_sync("a", "r", None, {"question": "q"})
    monkeypatch.delenv("PROM_REWARD_FAILURE_REWARD")
    with pytest.raises(ConfigError, match="failure_reward: not set"):
        prom_verl.compute_score_sync("a", "r", None, {"question": "q"})


def test_pairwise_group_needs_group_size():
    prom_verl.configure(PrometheusReward(judge_by_response({}, []), mode="pairwise_group"), failure_reward=0.0)
    with pytest.raises(ConfigError, match="group_size"):
        prom_verl.compute_score_sync("a", "r", None, {"question": "q"})


@pytest.mark.parametrize(
    "solution, truth, reference, reason",
    [
        (None, "72", None, "solution_str: expected the decoded response text, got NoneType"),
        (b"72", "72", None, "solution_str: expected the decoded response text, got bytes"),
        ("72", np.array(["72", "seventy-two"]), "72\nseventy-two", None),
        ("72", ["72", 72.0], "72\n72.0", None),
        ("72", np.int64(72), "72", None),
        ("72", np.float32("nan"), None, "ground_truth: nan is not a finite number"),
        ("72", {"target": ["72"]}, None, "ground_truth: expected a string, number or list of them, got dict"),
        ("72", b"72", None, "ground_truth: expected a string, number or list of them, got bytes"),
        ("72", True, None, "ground_truth: expected a string, number or list of them, got bool"),
    ],
    ids=[
        "solution-none",
        "solution-bytes",
        "truth-ndarray",
        "truth-list",
        "truth-np-int",
        "truth-np-nan",
        "truth-dict",
        "truth-bytes",
        "truth-bool",
    ],
)
def test_wrong_typed_arguments_are_read_or_fail_their_sample_alone(solution, truth, reference, reason):
    """verl hands ``ground_truth`` from parquet (numpy arrays and scalars); nothing is judged on a repr of it."""
    seen: list[GenerationRequest] = []
    prom_verl.configure(PrometheusReward(judge_by_response({"72": "Right. [RESULT] 5"}, seen)), failure_reward=-1.0)
    out = prom_verl.compute_score_sync("gsm8k", solution, truth, {"question": "How many?"})
    if reason is not None:
        assert out["score"] == -1.0 and out["judge_failed"] == 1.0 and not seen
        assert reason in out["judge_failure_reason"], out["judge_failure_reason"]
        return
    assert out["score"] == 5.0 and out["judge_failed"] == 0.0
    assert f"###Reference Answer (Score 5):\n{reference}\n\n" in seen[0].user
