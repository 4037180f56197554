"""``OutagePolicy`` and the ``openai`` backend inside a ``CallScope``: retries within the budget and the deadline,
per-call timeouts that cut a hung call, health reporting, the memo of answers (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import time

import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.outage import CallScope, JudgeHealth, OutagePolicy, call_scope, current_scope
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.errors import BackendError, ConfigError

REQ = GenerationRequest("sys", "user", sampling=SamplingConfig(max_tokens=8))
OK = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fine. [RESULT] 4"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4},
}
MODELS = {"data": [{"id": "judge"}]}


@pytest.mark.parametrize(
    "options, words",
    [
        ({"budget_s": -1}, "budget_s"),
        ({"backoff_s": "1"}, "backoff_s"),
        ({"call_timeout_s": 0}, "call_timeout_s"),
        ({"on_exhausted": "ignore"}, "on_exhausted"),
    ],
)
def test_bad_policies(options, words):
    with pytest.raises(ConfigError, match=words):
        OutagePolicy(**options)


@pytest.mark.parametrize(
    "call_timeout, now, deadline, want",
    [
        (None, 0.0, None, 600.0),  # no deadline: the backend's own timeout
        (None, 0.0, 170.0, 85.0),  # half the time left: a hung call is retried once before the deadline
        (None, 160.0, 170.0, 5.0),
        (30.0, 0.0, 170.0, 30.0),  # explicit
        (30.0, 150.0, 170.0, 20.0),  # never past the deadline
        (30.0, 0.0, None, 30.0),
    ],
)
def test_attempt_timeout_follows_the_deadline(call_timeout, now, deadline, want):
    assert OutagePolicy(call_timeout_s=call_timeout).attempt_timeout(now, deadline, 600.0) == want


def server(url: str) -> OpenAIServer:
    return OpenAIServer(url, model="judge", system_role=True, max_retries=0)


def test_a_503_streak_is_retried_within_the_budget_and_reported(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (503, {"error": "loading"}) if k <= 3 else (200, OK)})
    health = JudgeHealth()
    with pytest.raises(BackendError, match="failed after 1 attempt"):
        server(srv.url).generate([REQ])  # outside a reward call: max_retries=0 holds
    with call_scope(CallScope(OutagePolicy(budget_s=5, backoff_s=0.05), health=health)):
        [res] = server(srv.url).generate([REQ])
    assert res.completions[0].text == "Fine. [RESULT] 4"
    assert health.failures == 2 and health.status()["status"] == "ok"  # 3 failures in all, 1 outside the scope


def test_no_retry_past_the_budget(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (502, {"error": "bad gateway"})})
    health = JudgeHealth()
    start = time.monotonic()
    with call_scope(CallScope(OutagePolicy(budget_s=0.4, backoff_s=0.05), health=health)):
        with pytest.raises(BackendError, match=r"HTTP 502.*outage budget"):
            server(srv.url).generate([REQ])
    assert 0.2 < time.monotonic() - start < 2
    assert health.status()["status"] == "degraded" and "502" in health.status()["cause"]


def test_a_hung_call_is_cut_by_the_call_timeout_and_retried(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: None if k == 1 else (200, OK)})
    start = time.monotonic()
    with call_scope(CallScope(OutagePolicy(call_timeout_s=0.5, backoff_s=0.05))):
        [res] = server(srv.url).generate([REQ])
    took = time.monotonic() - start
    assert res.completions[0].text == "Fine. [RESULT] 4" and 0.5 <= took < 3, took
    assert len(srv.bodies("/v1/chat/completions")) == 2


def test_the_deadline_bounds_a_hung_judge(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: None})
    start = time.monotonic()
    with call_scope(CallScope(OutagePolicy(budget_s=60), deadline=time.monotonic() + 0.6)):
        with pytest.raises(BackendError, match="Timeout"):
            server(srv.url).generate([REQ])
    assert time.monotonic() - start < 2.5


def test_answers_are_replayed_to_a_later_pass_and_offline_asks_nothing(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, OK)})
    backend = server(srv.url)
    scope = CallScope(OutagePolicy())
    other = GenerationRequest("sys", "another", sampling=SamplingConfig(max_tokens=8))
    with call_scope(scope):
        scope.begin_pass()
        backend.generate([REQ, REQ])  # two identical requests: two answers
        backend.generate([REQ])  # the same pass: a re-sample asks the judge again
        assert len(srv.bodies("/v1/chat/completions")) == 3
        scope.begin_pass()
        backend.generate([REQ, REQ, REQ])  # the three answers of the first pass, replayed
        assert len(srv.bodies("/v1/chat/completions")) == 3
        scope.begin_pass()
        scope.offline = True
        with pytest.raises(BackendError, match="outage budget ran out"):
            backend.generate([other])
    assert len(srv.bodies("/v1/chat/completions")) == 3


def test_the_scope_reaches_a_worker_thread_inside_a_running_loop(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (503, {}) if k == 1 else (200, OK)})
    scope = CallScope(OutagePolicy(backoff_s=0.05))

    async def inside_a_loop():
        assert current_scope() is scope
        return server(srv.url).generate([REQ])  # run_sync hops to a worker thread here

    with call_scope(scope):
        [res] = asyncio.run(inside_a_loop())
    assert res.completions[0].text == "Fine. [RESULT] 4" and scope.health.failures == 1
