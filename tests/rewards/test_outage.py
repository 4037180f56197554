"""``rewards.outage``: the policy's numbers, and ``ajudge_until_answered`` asking the judge again for the items
its transport failed only (with back-off, within the budget and the deadline), then raising or failing them
with the cause; through ``PrometheusReward`` and a real ``OpenAIServer`` talking to a stand-in that dies or
hangs (real HTTP on 127.0.0.1): the answered samples are kept and never asked again, a hung call is cut."""

from __future__ import annotations

import json
import time

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.bridge import run_sync
from prom_reward.core.results import JudgeFailure
from prom_reward.errors import BackendError, ConfigError, JudgeUnavailableError
from prom_reward.rewards.outage import JudgeHealth, OutagePolicy, ajudge_until_answered
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample

FAST = OutagePolicy(budget_s=0.3, backoff_s=0.05, max_backoff_s=0.1)
DOWN = JudgeFailure("transport", "HTTP 503 from judge")


@pytest.mark.parametrize(
    "options, words",
    [
        ({"budget_s": -1}, "budget_s"),
        ({"backoff_s": "1"}, "backoff_s"),
        ({"call_timeout_s": 0}, "call_timeout_s"),
        ({"on_exhausted": "ignore"}, "on_exhausted"),
        # NaN or infinity: a budget that never runs out, a back-off or a cut that never comes (a step waits forever)
        *[
            ({name: value}, name)
            for name in ("budget_s", "backoff_s", "max_backoff_s", "call_timeout_s")
            for value in (float("nan"), float("inf"))
        ],
        ({"budget_s": True}, "budget_s"),
    ],
)
def test_bad_policies(options, words):
    with pytest.raises(ConfigError, match=words):
        OutagePolicy(**options)


@pytest.mark.parametrize(
    "call_timeout, now, deadline, want",
    [
        (None, 0.0, None, 600.0),  # no deadline: the default
        (None, 0.0, 170.0, 85.0),  # half the time left: a hung call is retried once before the deadline
        (None, 160.0, 170.0, 5.0),
        (30.0, 0.0, 170.0, 30.0),  # explicit
        (30.0, 150.0, 170.0, 20.0),  # never past the deadline
        (30.0, 0.0, None, 30.0),
    ],
)
def test_attempt_timeout_follows_the_deadline(call_timeout, now, deadline, want):
    assert OutagePolicy(call_timeout_s=call_timeout).attempt_timeout(now, deadline, 600.0) == want


def judge_until_answered(units, call, failures, policy, **options):
    """``ajudge_until_answered`` of a sync ``call``, waited for."""

    async def acall(idx, until):
        return call(idx, until)

    return run_sync(lambda: ajudge_until_answered(units, acall, failures, policy, **options))


def scripted(fail: dict[int, int]):
    """A judge call whose item i fails on the transport its first ``fail[i]`` times; outputs are failure lists."""
    asked: list[list[int]] = []

    def call(idx, until):
        asked.append(list(idx))
        out = []
        for i in idx:
            out.append(DOWN if fail.get(i, 0) > 0 else None)
            fail[i] = fail.get(i, 0) - 1
        return out

    return call, asked


def test_only_the_failed_items_are_asked_again_until_answered():
    call, asked = scripted({1: 2, 3: 1})
    health = JudgeHealth()
    out = judge_until_answered([[i] for i in range(4)], call, lambda o: o, OutagePolicy(backoff_s=0.05), health=health)
    assert asked == [[0, 1, 2, 3], [1, 3], [1]] and out.calls == 3 and not out.outage
    assert health.status()["status"] == "ok" and health.failures == 2


def test_a_unit_is_asked_again_whole():
    call, asked = scripted({3: 1})
    judge_until_answered([[0, 1], [2, 3]], call, lambda o: o, FAST)
    assert asked == [[0, 1, 2, 3], [2, 3]]


def test_a_call_that_raises_counts_as_every_item_failing_on_the_transport():
    tries = []

    def call(idx, until):
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise BackendError("engine restarting")
        return [None] * len(idx)

    out = judge_until_answered([[0], [1]], call, lambda o: o, OutagePolicy(budget_s=5, backoff_s=0.05))
    assert len(tries) == 3 and tries[2] - tries[1] >= 0.09 and [idx for idx, _ in out.parts] == [[0, 1]]


def test_past_the_budget_raise_says_how_long_and_why():
    call, _ = scripted({0: 99})
    health = JudgeHealth()
    start = time.monotonic()
    with pytest.raises(JudgeUnavailableError, match=r"failing for .* would pass the outage budget of 0.3 s.*HTTP 503"):
        judge_until_answered([[0]], call, lambda o: o, FAST, health=health)
    assert 0.1 < time.monotonic() - start < 2 and health.exhausted == 1
    assert health.status()["status"] == "degraded"


class FakeClock:
    """``time`` and ``asyncio`` of ``rewards.outage`` on a clock that a back-off's sleep moves on at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize(
    "deadline_in, hung, calls, words",
    [
        # back-off 1, 2, 4, 8 s: failing for 15 s, the next wait of 15 s would end at 30 s, past the 20 s budget
        (None, False, 5, "for 15 s and the next try, in 15 s, would pass the outage budget of 20 s (5.0 s left)"),
        (17.0, False, 5, "for 15 s and the next try, in 15 s, would pass the reward call's deadline (2.0 s left)"),
        # calls that hang until they are cut (call_timeout_s 30): the second one is cut at the end of the budget
        (None, True, 2, "for 20 s and the outage budget of 20 s is spent"),
        (10.0, True, 1, "and the reward call's deadline passed"),
    ],
)
def test_the_stop_says_why_with_the_real_numbers(monkeypatch, deadline_in, hung, calls, words):
    import asyncio

    from prom_reward.rewards import outage

    clock = FakeClock()
    monkeypatch.setattr(outage, "time", clock)
    monkeypatch.setattr(outage, "asyncio", clock)

    async def call(idx, until):
        if hung:
            clock.now = until
        return [DOWN] * len(idx)

    policy = OutagePolicy(budget_s=20, backoff_s=1, max_backoff_s=15, call_timeout_s=30, on_exhausted="fail")
    deadline = None if deadline_in is None else clock.now + deadline_in
    out = asyncio.run(ajudge_until_answered([[0]], call, lambda o: o, policy, deadline=deadline))
    assert words in out.outage[0] and out.outage[0].endswith("; last failure: HTTP 503 from judge")
    assert out.outage[0].startswith("the judge has been failing for ") and out.calls == calls


def test_the_deadline_caps_the_budget_and_reaches_the_call():
    seen = []

    def call(idx, until):
        seen.append(until)
        return [DOWN] * len(idx)

    start = time.monotonic()
    deadline = start + 0.3
    policy = OutagePolicy(budget_s=60, backoff_s=0.05, on_exhausted="fail")
    out = judge_until_answered([[0]], call, lambda o: o, policy, deadline=deadline)
    assert time.monotonic() - start < 2 and "would pass the reward call's deadline" in out.outage[0]
    assert all(u is not None and u <= deadline for u in seen)  # half the time left, at most


def _chat_reply(text: str) -> dict:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }


def test_past_the_budget_fail_keeps_what_the_judge_answered(fake_server):
    def chat(k, body):  # the judge answers two requests, then dies
        return (200, _chat_reply("Fine. [RESULT] 4")) if k <= 2 else (503, {"error": "engine died"})

    srv = fake_server({"/v1/chat/completions": chat, "/v1/models": lambda k, b: (200, {"data": [{"id": "j"}]})})
    judge = PrometheusJudge(backend="openai", base_url=srv.url, system_role=True, max_retries=0, max_concurrency=1)
    reward = PrometheusReward(judge, outage=OutagePolicy(budget_s=0.5, backoff_s=0.05, on_exhausted="fail"))
    reward.canary.due = False  # the outage alone (the canary's own retries: tests/rewards/test_canary.py)
    out = reward.judge_batch([RewardSample("Say hi.", f"answer {k}") for k in range(4)])
    bodies = [json.dumps(b) for b in srv.bodies("/v1/chat/completions")]
    assert out.rewards[:2] == [4.0, 4.0] and out.rewards[2:] == [None, None]
    assert all("engine died" in r for r in out.reasons[2:]) and out.metrics["outage_failures"] == 2.0
    assert [sum(f"answer {k}" in b for b in bodies) for k in (0, 1)] == [1, 1]  # kept, never asked again
    assert reward.health.status()["status"] == "degraded" and reward.health.exhausted == 1


def test_a_hung_call_is_cut_by_the_call_timeout_and_asked_again(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: None if k == 1 else (200, _chat_reply("Ok. [RESULT] 5"))})
    judge = PrometheusJudge(backend="openai", base_url=srv.url, model="j", system_role=True, max_retries=0)
    reward = PrometheusReward(judge, outage=OutagePolicy(call_timeout_s=0.5, backoff_s=0.05))
    reward.canary.due = False  # the requests counted are the batch's
    start = time.monotonic()
    out = reward.judge_batch([RewardSample("Say hi.", "hi")])
    took = time.monotonic() - start
    assert out.rewards == [5.0] and 0.5 <= took < 3, took
    assert len(srv.bodies("/v1/chat/completions")) == 2 and out.metrics["judge_calls"] == 2.0
