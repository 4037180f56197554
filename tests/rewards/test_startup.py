"""The one start-up check (``prom_reward.rewards.startup``): ``GET /models`` over aiohttp, a refused key read by the
one reader of 4xx replies (``_openai_wire.rejection``), and the async form awaited on the caller's loop, its probe
of a judge down at start a task there. The reward server's and the frameworks' uses are in
``tests/integrations/test_canary.py``; the rewards' canary in ``tests/rewards/test_canary.py``."""

from __future__ import annotations

import asyncio
import json

import pytest

from prom_reward.backends.base import JudgeServer
from prom_reward.errors import BackendError, JudgeConfigError, JudgeUnavailableError
from prom_reward.rewards.outage import JudgeHealth, OutagePolicy
from prom_reward.rewards.startup import acheck_judge, check_judge
from tests.fakes import StandInJudge


def test_an_in_process_judge_has_nothing_to_ask():
    check = check_judge(None)
    assert (check.reachable, check.models, check.probing) == ({}, {}, None)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_at_start_is_the_same_error_as_on_any_request(status):
    judge = StandInJudge(refuse=status).start()
    try:
        with pytest.raises(JudgeConfigError) as e:
            check_judge(JudgeServer((judge.url,), None, "wrong"))
    finally:
        judge.stop()
    assert e.value.status == status and e.value.url == judge.url
    assert str(e.value).startswith(f"judge {judge.url}: GET /models was refused (HTTP {status}: ")  # rejection's
    assert "the judge option api_key" in str(e.value) and "PROM_REWARD_API_KEY" in str(e.value)
    assert judge.keys == ["Bearer wrong"]  # the run's key reached GET /models


def test_the_async_check_is_awaited_and_probes_on_the_callers_loop():
    """A judge down at start: ``acheck_judge`` returns at once with its probe a task of the caller's loop, which
    finds the judge once it listens and marks the health ok."""
    late = StandInJudge(model="prometheus")
    health = JudgeHealth()

    async def start_up() -> tuple[dict[str, bool], dict[str, list[str]], bool]:
        check = await acheck_judge(JudgeServer((late.url,), "prometheus"), health=health, timeout=1.0, probe_every=0.1)
        assert check.probing is not None and check.probing.get_loop() is asyncio.get_running_loop()
        reachable = dict(check.reachable)
        assert health.status()["status"] == "degraded"
        late.start()
        await asyncio.wait_for(check.probing, 10)
        return reachable, check.models, check.probing.done()

    try:
        reachable, models, done = asyncio.run(start_up())
    finally:
        late.stop()
    assert reachable == {late.url: False} and models == {late.url: ["prometheus"]} and done
    assert health.status()["status"] == "ok"


@pytest.mark.parametrize("error", [BackendError("connection refused"), JudgeUnavailableError("down for 30 s")])
def test_a_canary_the_judge_does_not_answer_only_warns(error, caplog):
    """A judge that answers GET /models but not the canary's judgment (a transport failure, or the outage policy
    giving up with on_exhausted="raise") starts the run degraded, with the cause in the log and in /health."""

    class Reward:
        def served(self, model, max_model_len):
            pass

        async def acheck_configuration(self, deadline=None):
            raise error

    judge, health = StandInJudge().start(), JudgeHealth()
    try:
        check_judge(JudgeServer((judge.url,), None), reward=Reward(), outage=OutagePolicy(), health=health)
    finally:
        judge.stop()
    assert str(error) in caplog.text and "starting anyway" in caplog.text
    assert health.status()["status"] != "ok" and str(error) in json.dumps(health.status())
