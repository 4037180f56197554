"""The framework reward paths in a judge format other than Prometheus 2 (issue 33, item 6): Flow-Judge's 3-point
scale through OpenRLHF 0.11.2's reward server and in-process ``reward_func`` (its own ``SingleTurnAgentExecutor``)
and verl 0.9.1's reward loop, against a stand-in judge that answers as Flow-Judge does
(``<feedback>...</feedback><score>N</score>``). The settings name the format and a three-level rubric (which
Prometheus 2 would refuse); the configuration canary judges in the format; the rewards are its scores."""

from __future__ import annotations

import pytest
from openrlhf.utils import agent

from prom_reward.integrations import openrlhf_func
from prom_reward.integrations.openrlhf_server import create_app
from prom_reward.integrations.settings import RewardSettings
from tests.fakes import StandInJudge
from tests.integrations.test_openrlhf_http import running
from tests.integrations.test_openrlhf_server import tokenizer  # noqa: F401 (fixture)
from tests.integrations.test_reward_faults import clean, run_openrlhf  # noqa: F401 (clean: autouse fixture)
from tests.reward_faults import Case, check, settings_file

THREE = {"criteria": "Is the answer right?", "descriptions": ["wrong", "partly right", "right"]}
CASE = Case(responses=("good", "fair", "meh"), labels=(None, None, None), expected=(3.0, 1.0, 2.0))
"""The stand-in grades by the first word on 1..5 (good 5, fair 1, anything else 3), mapped onto Flow-Judge's 1..3."""


@pytest.fixture
def flow_judge():
    judge = StandInJudge({"good": 5, "fair": 1}, default=3).start()
    yield judge
    judge.stop()


def flow_settings(tmp_path, url):
    return settings_file(tmp_path, url, CASE, format="flow-judge-3", rubric=THREE)


def test_openrlhf_reward_server_in_flow_judge_format(flow_judge, tokenizer, tmp_path):  # noqa: F811
    settings = RewardSettings.load({"config_file": str(flow_settings(tmp_path, flow_judge.url))}, env={})
    assert settings.reward.format == "flow-judge-3"
    with running(create_app(settings.build_reward(), settings)) as url:
        rewards, failed, _ = run_openrlhf(agent.SingleTurnAgentExecutor(url + "/get_reward"), tokenizer, CASE)
    check(CASE, rewards, failed)
    assert {"good", "fair", "meh"} <= {r.split()[0] for r in flow_judge.graded if r}  # read from flow's <response>


def test_openrlhf_reward_func_in_flow_judge_format(flow_judge, tokenizer, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(flow_settings(tmp_path, flow_judge.url)))
    ex = agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path())
    rewards, failed, _ = run_openrlhf(ex, tokenizer, CASE)
    check(CASE, rewards, failed)


def test_verl_reward_loop_in_flow_judge_format(flow_judge, tiny_model_dir, tmp_path, monkeypatch):
    import verl  # noqa: F401 (a peer: tests.peers fails the run when it does not import)

    from tests.integrations.test_reward_faults_verl import score_batch, verl_worker

    monkeypatch.setenv("PROM_REWARD_CONFIG", str(flow_settings(tmp_path, flow_judge.url)))
    outputs = score_batch(verl_worker(tiny_model_dir), list(CASE.responses), [""] * len(CASE.responses))
    infos = [o["reward_extra_info"] for o in outputs]
    check(CASE, [o["reward_score"] for o in outputs], [i["judge_failed"] for i in infos])


def test_a_prometheus_rubric_is_refused_for_flow_judge_3_before_anything_is_judged(flow_judge, tmp_path):
    path = settings_file(tmp_path, flow_judge.url, CASE, format="flow-judge-3", rubric="helpfulness")
    with pytest.raises(Exception, match="flow-judge-3 grades need 3 score descriptions"):
        RewardSettings.load({"config_file": str(path)}, env={})
    assert flow_judge.chats == 0
