"""A checklist through the frameworks' own code (issue 34, item 4): OpenRLHF 0.11.2's ``SingleTurnAgentExecutor``
against the reward server and the in-process ``reward_func`` (the checklist in each sample's label), and verl
0.9.1's reward loop (the checklist in ``extra_info``), all judged over real HTTP by a stand-in judge that grades by
the response's first word (good 5, fair 2, on every criterion). The rewards are the weighted-mean formula of
docs/checklists.md mapped onto the 1..5 scale, not the plain grades (5 and 2); a sample whose checklist is bad
fails alone with the failure reward, its batch-mates rewarded."""

from __future__ import annotations

from openrlhf.utils import agent

from prom_reward.integrations import openrlhf_func
from prom_reward.integrations.openrlhf_server import create_app
from prom_reward.integrations.settings import RewardSettings
from tests.integrations.test_openrlhf_http import running
from tests.integrations.test_openrlhf_server import tokenizer  # noqa: F401 (fixture)
from tests.integrations.test_reward_faults import clean, run_openrlhf  # noqa: F401 (clean: autouse fixture)
from tests.reward_faults import FAILED, Case, check, settings_file

CHECKLIST = [{"criterion": "Answers the question", "weight": 2}, {"criterion": "Is rude", "category": "pitfall"}]
BAD = [{"criterion": "Answers the question", "weight": "heavy"}]
# good: s = 1 on both, (2*1 - 1*1) / 2 = 0.5 -> 1 + 4 * 0.5 = 3.0; fair: s = 0.25, (0.5 - 0.25) / 2 = 0.125 -> 1.5
CASE = Case(
    responses=("good", "fair", "good"),
    labels=({"checklist": CHECKLIST}, {"checklist": CHECKLIST}, {"checklist": BAD}),
    expected=(3.0, 1.5, FAILED),
)


def test_openrlhf_reward_server_takes_the_checklist_in_the_label(stand_in, tokenizer, tmp_path):  # noqa: F811
    judge = stand_in(CASE)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, CASE))}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        rewards, failed, _ = run_openrlhf(agent.SingleTurnAgentExecutor(url + "/get_reward"), tokenizer, CASE)
    check(CASE, rewards, failed)
    criteria = [p for p in judge.prompts if "Answers the question" in p or "Is rude" in p]
    assert len(criteria) == 4  # 2 judged samples x 2 criteria; the bad checklist was refused before judging


def test_openrlhf_reward_func_takes_the_checklist_in_the_label(stand_in, tokenizer, tmp_path, monkeypatch):  # noqa: F811
    judge = stand_in(CASE)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, CASE)))
    rewards, failed, _ = run_openrlhf(agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path()), tokenizer, CASE)
    check(CASE, rewards, failed)


def test_verl_reward_loop_takes_the_checklist_in_extra_info(stand_in, tiny_model_dir, tmp_path, monkeypatch, caplog):
    import verl  # noqa: F401 (a peer: tests.peers fails the run when it does not import)

    from tests.integrations.test_reward_faults_verl import score_batch, verl_worker

    judge = stand_in(CASE)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, CASE)))
    extra = [dict(label) for label in CASE.labels]
    outputs = score_batch(verl_worker(tiny_model_dir), list(CASE.responses), [""] * 3, extra)
    infos = [o["reward_extra_info"] for o in outputs]
    check(CASE, [o["reward_score"] for o in outputs], [i["judge_failed"] for i in infos])
    reasons = [r.getMessage() for r in caplog.records if r.name == "prom_reward.integrations.verl"]
    assert any("criterion 0 ('Answers the question'): weight" in m and "fix:" in m for m in reasons), reasons
