"""``rewards.guard.run_isolated``: item-tied failures are isolated by splitting, outages retried within the
budget, and past it either raised with the cause or failed with the answered samples kept (from the scope's
memo of a real ``OpenAIServer`` talking to a stand-in that dies mid-batch)."""

from __future__ import annotations

import json
import math
import time

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.outage import JudgeHealth, OutagePolicy
from prom_reward.errors import BackendError, ConfigError, InputError, JudgeUnavailableError, ServerRejected
from prom_reward.rewards.guard import run_isolated
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample

FAST = OutagePolicy(budget_s=0.3, backoff_s=0.05, max_backoff_s=0.1)


@pytest.mark.parametrize(
    "error",
    [
        InputError("bad text", index=0, field="response"),
        ServerRejected("HTTP 400: prompt too long", 400),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    ],
)
def test_item_tied_failures_are_split_down_to_the_sample(error):
    bad = {5, 11}
    calls = []

    def call(idx):
        calls.append(idx)
        if bad & set(idx):
            raise error
        return [i * 10 for i in idx]

    out = run_isolated([[i] for i in range(16)], call, FAST)
    judged = {i: v for idx, values in out.parts for i, v in zip(idx, values, strict=True)}
    assert judged == {i: i * 10 for i in range(16) if i not in bad}
    assert set(out.failed) == bad and not out.outage
    assert out.calls == len(calls) <= 1 + 2 * len(bad) * math.ceil(math.log2(16)) + 2


def test_a_failing_group_fails_as_a_whole():
    def call(idx):
        if 3 in idx:
            raise InputError("group member 3 is unusable")
        return idx

    out = run_isolated([[0, 1], [2, 3], [4, 5]], call, FAST)
    assert sorted(i for idx, _ in out.parts for i in idx) == [0, 1, 4, 5]
    assert set(out.failed) == {2, 3} and "unusable" in out.failed[2]


def test_configuration_errors_are_raised():
    def call(idx):
        raise ConfigError("no such backend")

    with pytest.raises(ConfigError):
        run_isolated([[0], [1]], call, FAST)


def test_an_outage_is_retried_until_the_judge_answers():
    health = JudgeHealth()
    tries = []

    def call(idx):
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise BackendError("HTTP 503")
        return idx

    out = run_isolated([[0], [1]], call, OutagePolicy(budget_s=5, backoff_s=0.05), health=health)
    assert [i for idx, _ in out.parts for i in idx] == [0, 1] and len(tries) == 3
    assert tries[2] - tries[1] >= 0.09  # backed off (0.05, then 0.1)
    assert health.status()["status"] == "ok" and health.failures == 2


def test_past_the_budget_raise_says_how_long_and_why():
    def call(idx):
        raise BackendError("connection refused")

    health = JudgeHealth()
    start = time.monotonic()
    with pytest.raises(JudgeUnavailableError, match=r"failing for .* outage budget is 0.3 s.*connection refused"):
        run_isolated([[0]], call, FAST, health=health)
    assert 0.1 < time.monotonic() - start < 2 and health.exhausted == 1
    assert health.status()["status"] == "degraded"


def test_the_deadline_caps_the_budget():
    def call(idx):
        raise BackendError("HTTP 502")

    start = time.monotonic()
    out = run_isolated(
        [[0]], call, OutagePolicy(budget_s=60, backoff_s=0.05, on_exhausted="fail"), deadline=time.monotonic() + 0.3
    )
    assert time.monotonic() - start < 2
    assert "deadline passed" in out.outage[0]


def test_past_the_budget_fail_keeps_what_the_judge_answered(fake_server):
    def chat(k, body):  # the judge answers two requests, then dies
        reply = {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "Fine. [RESULT] 4"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }
        return (200, reply) if k <= 2 else (503, {"error": "engine died"})

    srv = fake_server({"/v1/chat/completions": chat, "/v1/models": lambda k, b: (200, {"data": [{"id": "j"}]})})
    judge = PrometheusJudge(backend="openai", base_url=srv.url, system_role=True, max_retries=0, max_concurrency=1)
    reward = PrometheusReward(judge, outage=OutagePolicy(budget_s=0.5, backoff_s=0.05, on_exhausted="fail"))
    reward.canary.due = False  # this test counts the judge's answers (the canary: tests/rewards/test_canary.py)
    out = reward.judge_batch([RewardSample("Say hi.", f"answer {k}") for k in range(4)])
    bodies = [json.dumps(b) for b in srv.bodies("/v1/chat/completions")]
    assert out.rewards[:2] == [4.0, 4.0] and out.rewards[2:] == [None, None]
    assert all("engine died" in r for r in out.reasons[2:]) and out.metrics["outage_failures"] == 2.0
    assert [sum(f"answer {k}" in b for b in bodies) for k in (0, 1)] == [1, 1]  # kept, never asked again
    assert reward.health.status()["status"] == "degraded" and reward.health.exhausted == 1
