"""One ``GET /models`` per run (issue 44): every reward entry point asks a judge server its served model and
context length once, and the start-up check, the canary and every request read that answer."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from prom_reward.cli.main import main
from prom_reward.integrations import openrlhf_func, verifiers_judge
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.openrlhf_server import create_app
from prom_reward.integrations.settings import ENV_PREFIX, setting_names
from prom_reward.integrations.verifiers_judge import PrometheusVerifiersJudge, PrometheusVerifiersJudgeConfig
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward
from tests.fakes import StandInJudge, free_port
from tests.integrations.test_openrlhf_http import running


@pytest.fixture
def judge(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    stand_in = StandInJudge({"good": 5}).start()
    yield stand_in
    stand_in.stop()
    for shared in (prom_verl, verifiers_judge, openrlhf_func):
        shared.reset()


def _asked(judge: StandInJudge) -> tuple[int, set[str]]:
    """The ``GET /models`` calls and the models the chats asked for."""
    calls = judge.server.calls
    return sum(path == "/v1/models" for path, _ in calls), {b["model"] for p, b in calls if p.endswith("/completions")}


@pytest.mark.parametrize("kind", [PrometheusReward, AsyncPrometheusReward])
def test_a_trl_reward_asks_once(judge, kind):
    reward = kind({"backend": "openai", "base_url": judge.url, "system_role": False})
    for _ in range(2):  # the canary and a batch, then a batch
        out = reward(prompts=["q"], completions=["good"])
        assert (asyncio.run(out) if kind is AsyncPrometheusReward else out) == [5.0]
    reward.close()
    assert _asked(judge) == (1, {judge.model})


def test_the_reward_server_asks_once(judge, monkeypatch):
    def serve(reward, settings, host, port, **options):
        with running(create_app(reward, settings, **options)) as url:
            for _ in range(2):
                reply = httpx.post(url + "/get_reward", json={"query": ["Q? good"], "prompts": ["Q?"]}, timeout=30)
                assert reply.json()["rewards"] == [5.0]

    monkeypatch.setattr("prom_reward.integrations.openrlhf_server.serve_reward", serve)
    argv = ["reward-server", "--server", judge.url, "--failure-reward", "0", "--port", str(free_port())]
    assert main([*argv, "--batch-window-ms", "0"]) == 0
    assert _asked(judge) == (1, {judge.model})


def test_verl_compute_score_asks_once(judge):
    settings = {"server": judge.url, "failure_reward": 0, "judge": {"system_role": False}}
    for _ in range(2):
        out = asyncio.run(prom_verl.compute_score("d", "good", None, {"question": "q"}, **settings))
        assert out["score"] == 5.0
    assert _asked(judge) == (1, {judge.model})


def test_openrlhf_reward_func_asks_once(judge, monkeypatch):
    monkeypatch.setenv(ENV_PREFIX + "SERVER", judge.url)
    monkeypatch.setenv(ENV_PREFIX + "FAILURE_REWARD", "0")
    for _ in range(2):
        assert openrlhf_func.reward_func(["Q? good"], ["Q?"])["rewards"] == [5.0]
    assert _asked(judge) == (1, {judge.model})


def test_the_verifiers_judge_asks_once(judge):
    cfg = PrometheusVerifiersJudgeConfig(server=[judge.url], judge={"system_role": False})
    for _ in range(2):
        result = asyncio.run(PrometheusVerifiersJudge(cfg).evaluate(question="q", response="good"))
        assert result.parsed == 5.0
    assert _asked(judge) == (1, {judge.model})
