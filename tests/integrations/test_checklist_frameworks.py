"""A checklist through each framework's own reward call (scripted judge with known per-criterion verdicts):
OpenRLHF's ``reward_func`` (the checklist in the label) and verl's ``compute_score`` (in ``extra_info``) give
the aggregate the documented formula says; a bad checklist fails its sample alone with the fix."""

from __future__ import annotations

import asyncio
import re

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.integrations import openrlhf_func
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.openrlhf_inputs import label_fields
from prom_reward.integrations.settings import ENV_PREFIX, setting_names
from prom_reward.rewards.reward import PrometheusReward
from tests.judges import NO_VERDICT, response_of

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3}, "Shows work",
             {"criterion": "Is rude", "category": "pitfall"}]  # fmt: skip
VERDICTS = {("4 because 2+2=4", "Says 4"): 5, ("4 because 2+2=4", "Shows work"): 5, ("4 because 2+2=4", "Is rude"): 1,
            ("4, dummy", "Says 4"): 5, ("4, dummy", "Shows work"): 1, ("4, dummy", "Is rude"): 5}  # fmt: skip


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    openrlhf_func.reset()
    prom_verl.reset()
    yield
    openrlhf_func.reset()
    prom_verl.reset()


def reward(seen: list[GenerationRequest]) -> PrometheusReward:
    def respond(request: GenerationRequest, i: int) -> str:
        seen.append(request)
        m = re.search(r"\[Does the response (?:satisfy this criterion|fall into this pitfall): (.*?)\?\]", request.user)
        score = VERDICTS.get((response_of(request), m.group(1))) if m else None
        return NO_VERDICT if score is None else f"Judged. [RESULT] {score}"

    return PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0), normalize="unit")


def test_openrlhf_reward_func_reads_the_checklist_from_the_label():
    seen: list[GenerationRequest] = []
    openrlhf_func.configure(reward(seen), failure_reward=-1)
    prompts = ["Q: 2+2?\nA:"] * 3
    queries = [p + " " + r for p, r in zip(prompts, ["4 because 2+2=4", "4, dummy", "4, dummy"], strict=True)]
    bad = {"checklist": [{"criterion": "Says 4", "category": "vital"}]}
    out = openrlhf_func.reward_func(queries, prompts, [{"checklist": CHECKLIST}, {"checklist": CHECKLIST}, bad])
    assert [float(x) for x in out["rewards"]] == pytest.approx([1.0, (3 - 1) / 4, -1.0])
    assert "category: expected one of essential, important, optional, pitfall, got 'vital'" in out["failure_reasons"][2]
    assert len(seen) == 6  # two distinct responses x 3 criteria, the bad row never asked


def test_verl_compute_score_reads_the_checklist_from_extra_info():
    seen: list[GenerationRequest] = []
    prom_verl.configure(reward(seen), failure_reward=0.0)

    def score(response: str) -> dict:
        info = {"question": "2+2?", "checklist": CHECKLIST}
        return asyncio.run(prom_verl.compute_score("d", response, None, extra_info=info))

    assert score("4 because 2+2=4")["score"] == 1.0
    assert score("4, dummy")["score"] == pytest.approx((3 - 1) / 4)
    assert len(seen) == 6


def test_a_label_carries_its_checklist():
    assert label_fields({"checklist": CHECKLIST, "reference_answer": "4"}) == {
        "reference_answer": "4",
        "checklist": CHECKLIST,
    }
