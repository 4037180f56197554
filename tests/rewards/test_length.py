"""Opt-in length control: a judge scripted to pay for length shows a high reward-length correlation before
the group-relative correction and about none after, while the quality signal survives; the overlong penalty
against a fixed baseline and the group median; options validated; and once with the real vLLM engine."""

from __future__ import annotations

import math
import random
from statistics import fmean

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import ConfigError
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.diagnostics import control_length, length_keys, overlong_penalty
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.stats import pearson, spearman
from tests.judges import response_of


def length_biased_judge() -> PrometheusJudge:
    """Grades ``good ...`` one point above ``bad ...``, plus a point per 25 characters (up to 3)."""

    def respond(request: GenerationRequest, i: int) -> str:
        text = response_of(request)
        quality = 2 if text.startswith("good") else 1
        return f"Longer is better. [RESULT] {quality + min(3, len(text) // 25)}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)


def rollouts(seed: int = 0, prompts: int = 6, per_prompt: int = 8) -> tuple[list[str], list[str], list[int]]:
    """Completions whose quality is independent of their length (5 to 95 characters)."""
    rng = random.Random(seed)
    ps, cs, quality = [], [], []
    for p in range(prompts):
        for _ in range(per_prompt):
            q = rng.random() < 0.5
            ps.append(f"Question {p}: explain something.")
            cs.append(("good " if q else "bad ") + "x" * rng.randint(5, 95))
            quality.append(int(q))
    return ps, cs, quality


def group_spearman(rewards, completions, prompts) -> float:
    values = []
    for p in dict.fromkeys(prompts):
        idx = [i for i, q in enumerate(prompts) if q == p]
        c = spearman([rewards[i] for i in idx], [len(completions[i]) for i in idx])
        if c is not None:
            values.append(c)
    return fmean(values)


def test_group_correction_takes_the_length_out_of_a_length_biased_judge():
    prompts, completions, quality = rollouts()
    plain = PrometheusReward(length_biased_judge())
    fixed = PrometheusReward(length_biased_judge(), length_correction=True)
    before = plain(prompts=prompts, completions=completions)
    after = fixed(prompts=prompts, completions=completions)
    corr_before = group_spearman(before, completions, prompts)
    corr_after = group_spearman(after, completions, prompts)
    assert corr_before > 0.6 and abs(corr_after) < 0.15, (corr_before, corr_after)
    assert plain.last_metrics["diag/length_spearman_group_mean"] == pytest.approx(corr_before)
    assert fixed.last_metrics["diag/length_spearman_group_mean"] == pytest.approx(corr_after)
    assert fixed.last_metrics["length/spearman_before"] == pytest.approx(plain.last_metrics["diag/length_spearman"])
    assert fixed.last_metrics["length/corrected_groups"] == 6.0
    assert fixed.last_metrics["length/reward_per_doubling"] > 0.5
    # the quality signal survives, and each group keeps its mean reward
    assert spearman(after, quality) > spearman(before, quality) > 0
    for p in set(prompts):
        idx = [i for i, q in enumerate(prompts) if q == p]
        assert fmean(after[i] for i in idx) == pytest.approx(fmean(before[i] for i in idx))
        assert abs(pearson([after[i] for i in idx], [math.log(len(completions[i])) for i in idx])) < 1e-9


def test_small_groups_and_failed_judgments_are_left_alone():
    cfg = RewardConfig(length_correction=True, length_min_group=4)
    rewards = [1.0, 5.0, 2.0, None, 4.0, 1.0, 3.0]
    responses = ["a", "a" * 50, "a" * 3, "a" * 99, "a" * 70, "a" * 2, "a" * 9]
    groups = ["p", "p", "p", "p", "q", "q", "q"]  # p: 3 scored (below the minimum), q: 3
    out, metrics = control_length(rewards, responses, groups, cfg)
    assert out == rewards and metrics["length/corrected_groups"] == 0.0
    out, metrics = control_length(rewards, responses, groups, RewardConfig(length_correction=True, length_min_group=3))
    assert out[3] is None and metrics["length/corrected_groups"] == 2.0
    assert control_length(rewards, responses, groups, RewardConfig()) == (rewards, {})  # off: untouched


def test_equal_lengths_are_not_corrected():
    out, metrics = control_length(
        [1.0, 5.0, 3.0], ["abc", "xyz", "pqr"], ["g"] * 3, RewardConfig(length_correction=True, length_min_group=3)
    )
    assert out == [1.0, 5.0, 3.0] and metrics["length/corrected_groups"] == 0.0


@pytest.mark.parametrize(
    "length, baseline, ratio, expected",
    [
        (100, 100, 1.5, 0.0),
        (150, 100, 1.5, 0.0),
        (225, 100, 1.5, 0.5),
        (300, 100, 1.5, 1.0),
        (10**6, 100, 1.5, 1.0),
        (120, 100, 1.0, 0.2),
        (50, 0, 1.5, 0.0),
    ],
)
def test_overlong_penalty_ramp(length, baseline, ratio, expected):
    assert overlong_penalty(
        length, baseline, RewardConfig(overlong_penalty=1.0, overlong_ratio=ratio)
    ) == pytest.approx(expected)


def test_overlong_penalty_against_the_group_median_and_a_fixed_baseline():
    responses = ["a" * 10, "a" * 12, "a" * 14, "a" * 42, "b" * 500]
    groups = ["p", "p", "p", "p", "q"]
    rewards = [3.0, 3.0, None, 3.0, 3.0]
    out, m = control_length(rewards, responses, groups, RewardConfig(overlong_penalty=2.0, overlong_ratio=1.5))
    # p's median is 13 characters (the failed sample's length counts): 42 is past 2 * 1.5 * 13 = 39, full penalty;
    # q alone is its own median
    assert out == [3.0, 3.0, None, 1.0, 3.0]
    assert m["length/penalized_share"] == 0.25 and m["length/penalty_mean"] == pytest.approx(0.5)
    out, _ = control_length(
        rewards, responses, groups, RewardConfig(overlong_penalty=2.0, overlong_baseline=100, overlong_ratio=2.0)
    )
    assert out == [3.0, 3.0, None, 3.0, 1.0]  # 500 chars: past 2 * 2.0 * 100, the full 2.0
    assert set(length_keys(RewardConfig(overlong_penalty=2.0))) == {
        "length/spearman_before",
        "length/penalized_share",
        "length/penalty_mean",
    }


@pytest.mark.parametrize(
    "options, match",
    [
        ({"length_correction": "yes"}, "length_correction"),
        ({"length_min_group": 2}, "length_min_group"),
        ({"overlong_penalty": -1}, "overlong_penalty"),
        ({"overlong_penalty": math.nan}, "overlong_penalty"),
        ({"overlong_baseline": "mean"}, "overlong_baseline"),
        ({"overlong_baseline": 0}, "overlong_baseline"),
        ({"overlong_ratio": 0}, "overlong_ratio"),
        ({"length_min_group": True}, "length_min_group"),
    ],
)
def test_bad_length_options_are_config_errors(options, match):
    with pytest.raises(ConfigError, match=match):
        RewardConfig(**options)


@pytest.mark.integration
@pytest.mark.smollm2
def test_length_control_with_the_real_engine(smollm2_engine, tmp_path):
    """SmolLM2 grades, judged with and without the correction: the group means agree, the corrected rewards carry
    no log-length trend, and the penalty hits only the overlong completion. The second reward reads the first's
    grades from the judgment store (greedy bf16 decoding on CPU moves with the engine's prefix cache)."""
    judge = PrometheusJudge(
        backend=smollm2_engine,
        force_verdict="always",
        sampling={"max_tokens": 12, "temperature": 0.0},
        store=tmp_path / "judgments.sqlite",
    )
    prompt = "Name a fruit and say one thing about it."
    completions = [
        "Apple.",
        "A banana is yellow.",
        "An apple is a fruit that grows on trees and is often red.",
        "Pear. " * 40,
    ]
    plain = PrometheusReward(judge)
    fixed = PrometheusReward(judge, length_correction=True, length_min_group=3, overlong_penalty=1.0)
    before = plain(prompts=[prompt] * 4, completions=completions)
    after = fixed(prompts=[prompt] * 4, completions=completions)
    assert all(r is not None for r in before + after) and judge.stats.stored_samples == 4
    metrics = fixed.last_metrics
    assert metrics["length/spearman_before"] == pytest.approx(plain.last_metrics["diag/length_spearman"])
    assert metrics["length/penalized_share"] == 0.25  # only the 240-character one is past 1.5 x the median
    unpenalized = [a + (1.0 if i == 3 else 0.0) for i, a in enumerate(after)]
    assert metrics["length/corrected_groups"] == 1.0
    assert fmean(unpenalized) == pytest.approx(fmean(before))
    trend = pearson(unpenalized, [math.log(len(c)) for c in completions])
    assert trend is None or abs(trend) < 1e-9, (before, after)  # None: the judge gave every completion one grade
