"""The fault matrix (``tests.reward_faults``) of the TRL 1.16 reward paths, each called by the trainer's own
reward step on a real trainer (tiny model, CPU) against a stand-in judge server:

- ``PrometheusReward`` through ``GRPOTrainer._calculate_rewards`` and ``RLOOTrainer._calculate_rewards``;
- ``OnlineDPOJudgeReward`` through ``OnlineDPOTrainer._calculate_rewards_from_functions``.

A sample that cannot be judged gets ``None`` (TRL: NaN, left out of the group statistics) with its reason in
the completions table and a counted metric; online DPO settles an unjudged pair by its seeded coin, counted.
A judge down past the budget stops the step with ``JudgeUnavailableError`` (the default of every path,
``on_exhausted="raise"``) or, with ``on_exhausted="fail"``, abstains on every unanswered sample, counted.
"""

from __future__ import annotations

import math

import pytest

from prom_reward.errors import JudgeConfigError, JudgeUnavailableError
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward
from prom_reward.rewards.reward import PrometheusReward
from tests.reward_faults import CASES, FAILED, GRADES, JUDGE_OPTIONS, MISCONFIGURED, Case, settings_values

PROMPT = "Question: What is two plus two? Please answer briefly.\nAnswer:"
JUDGE = {"backend": "openai", **JUDGE_OPTIONS, "sampling": {"max_tokens": 32}}


def placeholder(prompts, completions, **kwargs):
    return [0.0] * len(prompts)


@pytest.fixture(scope="module")
def trainers(tiny_model_dir, tmp_path_factory):
    """``trainers(kind)``: a GRPO, RLOO or online DPO trainer on the tiny model (built once each)."""
    from datasets import Dataset

    built: dict[str, object] = {}
    common = {"report_to": "none", "save_strategy": "no", "use_cpu": True, "seed": 0, "max_steps": 1}

    def get(kind: str):
        if kind in built:
            return built[kind]
        out = str(tmp_path_factory.mktemp(kind))
        data = Dataset.from_dict({"prompt": [PROMPT] * 4})
        if kind == "online_dpo":
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

            args = OnlineDPOConfig(
                output_dir=out, per_device_train_batch_size=2, max_new_tokens=8, bf16=False, **common
            )
            built[kind] = OnlineDPOTrainer(
                model=AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)),
                reward_funcs=placeholder,
                args=args,
                train_dataset=data,
                processing_class=AutoTokenizer.from_pretrained(str(tiny_model_dir)),
            )
        else:
            from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

            config, trainer = (GRPOConfig, GRPOTrainer) if kind == "grpo" else (RLOOConfig, RLOOTrainer)
            args = config(
                output_dir=out, per_device_train_batch_size=4, num_generations=4, max_completion_length=8, **common
            )
            built[kind] = trainer(model=str(tiny_model_dir), reward_funcs=placeholder, args=args, train_dataset=data)
        return built[kind]

    return get


def reward_config(url: str, case: Case) -> RewardConfig:
    """The case's ``RewardConfig``: the one the framework paths get from the same settings (``RewardSettings``)."""
    return RewardSettings.from_values(settings_values(url, case)).reward


def stop_error(case: Case) -> tuple[type, str]:
    """What stops the step: the configuration failure, or the judge down past the budget."""
    if case.misconfigured:
        return JudgeConfigError, MISCONFIGURED
    return JudgeUnavailableError, r"failing for .* outage budget .* 503"


def trl_samples(case: Case) -> tuple[list[str], list]:
    """The case's completions and ``reference_answer`` column as TRL hands them to a reward: decoded strings, so
    the poisoned case's lone surrogate is in a completion and its NaN in the reference column."""
    responses = list(case.responses)
    refs: list = [None] * len(responses)
    if case is CASES["poisoned"]:
        responses[1] = "fair \ud800"
        refs[2] = math.nan
    return responses, refs


# -- GRPO and RLOO ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["grpo", "rloo"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trl_calculate_rewards(kind, name, stand_in, trainers):
    case = CASES[name]
    judge = stand_in(case)
    trainer = trainers(kind)
    reward = PrometheusReward({**JUDGE, "base_url": judge.url}, reward_config(judge.url, case))
    trainer.reward_funcs, trainer.reward_func_names, trainer.reward_processing_classes = (
        [reward],
        ["prometheus"],
        [None],
    )
    trainer._pending_metrics.clear()
    trainer._pending_extra_logs.clear()
    responses, refs = trl_samples(case)
    inputs = [{"prompt": PROMPT, "reference_answer": ref} for ref in refs]

    def step():
        return trainer._calculate_rewards(inputs, [PROMPT] * len(responses), responses, [[1]] * len(responses))

    if case.stops:
        error, words = stop_error(case)
        with pytest.raises(error, match=words):
            step()
        return
    got = step()[:, 0].tolist()
    want = [math.nan if w == FAILED else w for w in case.expected]
    assert [g if g == g else "nan" for g in got] == [w if w == w else "nan" for w in want]
    metrics, extra = trainer._pending_metrics, trainer._pending_extra_logs
    failed = sum(w == FAILED for w in case.expected)
    assert metrics["prometheus/failed_samples"][-1] + metrics["prometheus/outage_failures"][-1] == failed
    reasons = extra.get("prometheus_failure_reason", [""] * len(got))
    assert [bool(r) for r in reasons] == [w == FAILED for w in case.expected], reasons
    if name == "dead":
        assert metrics["prometheus/outage_failures"][-1] == 2 and all("failing for" in r for r in reasons)
    if name == "over_context":
        assert metrics["prometheus/truncated_responses"][-1] >= 1


def test_a_trl_reward_stops_by_default_when_the_judge_stays_down():
    assert PrometheusReward({"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}).config.outage.on_exhausted == (
        "raise"
    )
    assert OnlineDPOJudgeReward(
        {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    ).config.outage.on_exhausted == ("raise")


# -- online DPO ---------------------------------------------------------------------------------
def rival(response: str) -> str:
    """The second completion of a pair: one the first beats when its grade is above 2, else one that beats it."""
    return "fair" if GRADES.get(response.split()[0], 3) > 2 else "good"


@pytest.mark.parametrize("name", sorted(CASES))
def test_online_dpo_calculate_rewards(name, stand_in, trainers):
    case = CASES[name]
    judge = stand_in(case)
    trainer = trainers("online_dpo")
    reward = OnlineDPOJudgeReward({**JUDGE, "base_url": judge.url}, reward_config(judge.url, case))
    trainer.reward_funcs, trainer.reward_processing_classes = [reward], [None]
    first, refs = trl_samples(case)
    b = len(first)
    second = [rival(r) for r in case.responses]

    def step():
        return trainer._calculate_rewards_from_functions(
            prompts=[PROMPT] * (2 * b),
            completions=first + second,
            completion_ids_list=[[1]] * (2 * b),
            reference_answer=refs * 2,
        )

    if case.stops:
        error, words = stop_error(case)
        with pytest.raises(error, match=words):
            step()
        return
    got = step().tolist()
    unjudged = [w == FAILED for w in case.expected]
    assert reward.last_metrics["unjudged_pairs"] == sum(unjudged) == reward.stats.unjudged_pairs
    for i in range(b):
        assert sorted((got[i], got[b + i])) == [0.0, 1.0], got  # every pair has a winner, unjudged ones by the coin
        if not unjudged[i]:
            assert got[i] == float(case.expected[i] > 2), (i, got)  # the judge's pick
    assert reward.stats.decided_by_judge == b - sum(unjudged)
    if name == "over_context":
        assert any(r.startswith("long xxx") and len(r) < 20_000 for r in judge.graded)  # truncated, then judged
