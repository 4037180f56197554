"""A checklist through each framework's own reward call (scripted judge with known per-criterion verdicts):
OpenRLHF's ``reward_func`` and reward server (the checklist in the label) and verl's ``compute_score`` (in
``extra_info``) give the aggregate the documented formula says, and log the batch's checklist pass rates (overall
and per category) under the names TRL logs; a bad checklist fails its sample alone with the fix."""

from __future__ import annotations

import asyncio
import re

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.bridge import run_sync
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.checklist.judging import CHECKLIST_KEYS
from prom_reward.integrations import openrlhf_func
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.openrlhf_func import label_fields
from prom_reward.integrations.settings import ENV_PREFIX, setting_names
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample
from tests.integrations.test_openrlhf_http import running, server_app
from tests.integrations.test_openrlhf_server import execute, tokenizer  # noqa: F401 (fixture)
from tests.judges import NO_VERDICT, response_of

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3}, "Shows work",
             {"criterion": "Is rude", "category": "pitfall"}]  # fmt: skip
VERDICTS = {("4 because 2+2=4", "Says 4"): 5, ("4 because 2+2=4", "Shows work"): 5, ("4 because 2+2=4", "Is rude"): 1,
            ("4, dummy", "Says 4"): 5, ("4, dummy", "Shows work"): 1, ("4, dummy", "Is rude"): 5}  # fmt: skip


GOOD, BAD = "4 because 2+2=4", "4, dummy"
BOTH = {"checklist_pass_rate": 4 / 6, "checklist_essential_pass_rate": 1.0, "checklist_important_pass_rate": 0.5,
        "checklist_optional_pass_rate": 0.0, "checklist_pitfall_pass_rate": 0.5, "checklist_undecided_rate": 0.0,
        "checklist_dropped_criteria": 0.0, "checklist_judgments": 6.0, "mean_checklist_score": 0.75}  # fmt: skip
"""One batch of GOOD and BAD: GOOD passes its 3 criteria, BAD only "Says 4" (it falls into "Is rude"); no
optional criterion, so that rate reads 0 (a key every sample carries, with a number)."""


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
    logs = out["extra_logs"]
    assert {k: logs[k] for k in CHECKLIST_KEYS} == {k: pytest.approx([v] * 3) for k, v in BOTH.items()}


def test_trl_logs_the_same_names_and_values():
    """What the frameworks carry per sample is what TRL's reward logs for the same batch (``<name>/...``)."""
    samples = [RewardSample("Q: 2+2?", r, instruction="2+2?", checklist=CHECKLIST) for r in (GOOD, BAD)]
    metrics = run_sync(lambda: reward([]).ajudge_batch(samples)).metrics
    assert {k: metrics[k] for k in BOTH if k != "checklist_optional_pass_rate"} == pytest.approx(
        {k: v for k, v in BOTH.items() if k != "checklist_optional_pass_rate"}
    )
    assert metrics["checklist/Says_4_pass_rate"] == 1.0 and metrics["checklist/Shows_work_pass_rate"] == 0.5


def test_openrlhf_server_logs_checklist_pass_rates_into_experience_info(tokenizer):  # noqa: F811
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.utils import agent

    with running(server_app(reward([]), failure_reward="min", batch_window_ms=300)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")

        async def batch():
            label = {"checklist": CHECKLIST}
            return await asyncio.gather(*(execute(ex, tokenizer, " " + r, label=label) for r in (GOOD, BAD)))

        outs = asyncio.run(batch())
    assert [o["extra_logs"]["judge_batch_size"] for o in outs] == [[2.0], [2.0]]  # one judge call
    assert [o["reward"] for o in outs] == [[1.0], [0.5]]
    gen = SamplesGenerator.__new__(SamplesGenerator)
    info = make_experience_batch([gen._process_response_into_experience(o, max_len=512) for o in outs]).info
    assert {k: [float(v) for v in info[k]] for k in CHECKLIST_KEYS} == {
        k: pytest.approx([v, v]) for k, v in BOTH.items()
    }


def test_verl_compute_score_reads_the_checklist_from_extra_info():
    seen: list[GenerationRequest] = []
    prom_verl.configure(reward(seen), failure_reward=0.0)

    def score(response: str) -> dict:
        info = {"question": "2+2?", "checklist": CHECKLIST}
        return asyncio.run(prom_verl.compute_score("d", response, None, extra_info=info))

    good, bad = score(GOOD), score(BAD)  # one batch each
    assert good["score"] == 1.0
    assert bad["score"] == pytest.approx((3 - 1) / 4)
    assert len(seen) == 6
    assert set(good) == set(bad) and set(CHECKLIST_KEYS) <= set(good)
    assert good["checklist_pass_rate"] == 1.0 and good["checklist_pitfall_pass_rate"] == 1.0
    assert bad["checklist_pass_rate"] == pytest.approx(1 / 3) and bad["checklist_important_pass_rate"] == 0.0
    assert bad["checklist_essential_pass_rate"] == 1.0 and bad["mean_checklist_score"] == 0.5


def test_a_label_carries_its_checklist():
    assert label_fields({"checklist": CHECKLIST, "reference_answer": "4"}) == {
        "reference_answer": "4",
        "checklist": CHECKLIST,
    }
