"""``PrometheusReward`` / ``AsyncPrometheusReward`` with a checklist column (scripted judge: known verdicts):
rewards on the judge's scale by the documented formula, the pass-rate metrics under one set of names, a bad
checklist failing its sample alone before judging, mixed batches, the store answering a second epoch."""

from __future__ import annotations

import asyncio
import re

import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import ConfigError
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward
from tests.judges import NO_VERDICT, response_of

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3}, "Shows work",
             {"criterion": "Is rude", "category": "pitfall"}]  # fmt: skip
VERDICTS = {  # (response, criterion) -> grade 1..5 (None: no verdict)
    ("4 because 2+2=4", "Says 4"): 5, ("4 because 2+2=4", "Shows work"): 5, ("4 because 2+2=4", "Is rude"): 1,
    ("4, dummy", "Says 4"): 5, ("4, dummy", "Shows work"): 1, ("4, dummy", "Is rude"): 5,
    ("5", "Says 4"): None, ("5", "Shows work"): 3, ("5", "Is rude"): 1,
}  # fmt: skip


def scripted(seen: list[GenerationRequest], **options) -> PrometheusJudge:
    def respond(request: GenerationRequest, i: int) -> str:
        seen.append(request)
        m = re.search(r"\[Does the response (?:satisfy this criterion|fall into this pitfall): (.*?)\?\]", request.user)
        if m is None:
            return "Plain rubric. [RESULT] 3"
        score = VERDICTS.get((response_of(request), m.group(1)))
        return NO_VERDICT if score is None else f"Judged. [RESULT] {score}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0, **options)


RESPONSES = ["4 because 2+2=4", "4, dummy", "5"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # weighted mean on [0, 1] mapped onto 1..5: 1 + 4 * (3*1 + 1*s_work - 1*s_rude) / 4
        ({}, [5.0, 1 + 4 * (3 * 1 + 0 - 1) / 4, None]),
        ({"normalize": "unit"}, [1.0, (3 * 1 + 0 - 1) / 4, None]),
        ({"normalize": "symmetric", "checklist_aggregation": "minimum"}, [1.0, -1.0, None]),
        ({"normalize": "unit", "checklist_aggregation": "gate"}, [1.0, 0.0 - 1.0, None]),
    ],
)
def test_a_checklist_column_rewards_by_the_aggregation(options, expected):
    seen: list[GenerationRequest] = []
    reward = PrometheusReward(scripted(seen), **options)
    logged: dict[str, float] = {}
    extra: dict[str, list] = {}
    out = reward(prompts=["2+2?"] * 3, completions=RESPONSES, checklist=[CHECKLIST] * 3,
                 log_metric=logged.__setitem__, log_extra=extra.__setitem__)  # fmt: skip
    assert out == pytest.approx(expected)
    assert len(seen) == 9 and len(reward.judge.backend.calls) == 1
    assert extra["prometheus_failure_reason"][2].startswith("essential criterion 0 ('Says 4') could not be judged")
    assert logged["prometheus/checklist_essential_pass_rate"] == 1.0
    assert logged["prometheus/checklist_pitfall_pass_rate"] == pytest.approx(2 / 3)
    assert logged["prometheus/checklist/Shows_work_pass_rate"] == pytest.approx(1 / 3)
    assert logged["prometheus/checklist_undecided_rate"] == pytest.approx(1 / 9)
    assert logged["prometheus/checklist_judgments"] == 9.0
    assert extra["prometheus_feedback"][1].startswith("[0] satisfied: Judged.")


def test_the_async_reward_gives_the_same_rewards():
    reward = AsyncPrometheusReward(scripted([]), normalize="unit")
    out = asyncio.run(reward(prompts=["2+2?"] * 2, completions=RESPONSES[:2], checklist=[CHECKLIST] * 2))
    assert out == pytest.approx([1.0, 0.5])


def test_a_bad_checklist_fails_its_sample_alone_before_judging():
    seen: list[GenerationRequest] = []
    reward = PrometheusReward(scripted(seen), normalize="unit")
    bad = [{"criterion": "Says 4", "weight": "lots"}]
    extra: dict[str, list] = {}
    got = reward(prompts=["2+2?"] * 2, completions=RESPONSES[:2], checklist=[bad, CHECKLIST],
                 log_extra=extra.__setitem__)  # fmt: skip
    assert got == [None, 0.5]  # the good row: (3 * 1 + 0 - 1) / 4
    assert extra["prometheus_failure_reason"][0] == (
        "criterion 0 ('Says 4'): weight: expected a finite number > 0, got 'lots'; fix: give a number > 0 "
        "(a pitfall's weight is positive too: its category makes it subtract)"
    )
    assert all("Says 4" in r.user or "Shows work" in r.user or "Is rude" in r.user for r in seen)
    assert len(seen) == 3  # only the good row's criteria were asked


def test_rows_without_a_checklist_are_judged_by_the_rubric_in_the_same_batch():
    seen: list[GenerationRequest] = []
    reward = PrometheusReward(scripted(seen), normalize="unit")
    got = reward(prompts=["2+2?"] * 2, completions=RESPONSES[:2], checklist=[None, CHECKLIST])
    assert got == pytest.approx([0.5, 0.5])  # the plain rubric's 3 -> 0.5; the checklist's (3 + 0 - 1) / 4
    assert reward.last_metrics["checklist_judgments"] == 3.0


def test_a_second_epoch_asks_the_judge_nothing_new(tmp_path):
    seen: list[GenerationRequest] = []
    store = tmp_path / "judgments.sqlite"
    first = PrometheusReward(scripted(seen, store=store))(prompts=["2+2?"] * 3, completions=RESPONSES,
                                                          checklist=[CHECKLIST] * 3)  # fmt: skip
    again: list[GenerationRequest] = []
    second = PrometheusReward(scripted(again, store=store))(prompts=["2+2?"] * 3, completions=RESPONSES,
                                                            checklist=[CHECKLIST] * 3)  # fmt: skip
    assert len(seen) == 9 and again == [] and first == second


def test_a_custom_column_name_and_implicit_mode():
    seen: list[GenerationRequest] = []
    reward = PrometheusReward(scripted(seen), checklist_column="rubric_items", checklist_mode="implicit")
    got = reward(prompts=["2+2?"], completions=["4 because 2+2=4"], rubric_items=[CHECKLIST])
    assert len(seen) == 1 and "(2) [important, weight 1] Shows work" in seen[0].user
    assert got == [3.0]  # the scripted judge's answer to a rubric it does not know


@pytest.mark.parametrize("cls", [PrometheusReward, AsyncPrometheusReward])
@pytest.mark.parametrize("mode", ["pairwise_group", "pairwise_reference"])
def test_a_checklist_in_a_pairwise_mode_is_refused_before_anything_is_judged(cls, mode):
    seen: list[GenerationRequest] = []
    reward = cls(scripted(seen), mode=mode)
    columns = {"baseline": ["c", "c"]} if mode == "pairwise_reference" else {}
    want = f"column 'checklist': a checklist is judged per criterion in mode 'absolute', not {mode!r}; fix: mode="
    with pytest.raises(ConfigError, match=re.escape(want)):
        got = reward(prompts=["q", "q"], completions=["a", "b"], checklist=[CHECKLIST] * 2, **columns)
        asyncio.run(got) if cls is AsyncPrometheusReward else got
    assert seen == []  # not even the start-up check: every sample would have failed
    got = reward(prompts=["q", "q"], completions=["a", "b"], checklist=[None, None], **columns)
    got = asyncio.run(got) if cls is AsyncPrometheusReward else got
    assert len(got) == 2 and seen  # rows without a checklist go to the judge as usual


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"checklist_mode": "both"}, "checklist_mode: expected one of explicit, implicit"),
        ({"checklist_aggregation": "median"}, "checklist_aggregation: unknown checklist aggregation 'median'"),
        ({"checklist_column": ""}, "checklist_column: expected a non-empty string"),
    ],
)
def test_checklist_settings_are_validated(options, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RewardConfig(**options)
