"""PrometheusReward inside real TRL 1.16 trainers (GRPO, RLOO) on CPU, with a real vLLM judge."""

from __future__ import annotations

import math
import pickle

import pytest

from prom_reward import PrometheusJudge, PromRewardError
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.rewards.diagnostics import DIAG_KEYS
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward

pytestmark = pytest.mark.integration

PROMPTS = ["Name a colour.", "Say hello politely.", "What is 3 + 4?", "Name a fruit."]


class Recording(PrometheusReward):
    """Keeps what the trainer asked and what was returned."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[tuple[int, list[float | None], set[str]]] = []

    def compute(self, prompts, completions, completion_ids=None, **kwargs):
        out = super().compute(prompts, completions, completion_ids, **kwargs)
        self.calls.append((len(prompts), out, set(kwargs)))
        return out


def dataset(n_repeat: int = 2):
    from datasets import Dataset

    prompts = PROMPTS * n_repeat
    return Dataset.from_dict({"prompt": prompts, "rubric": ["helpfulness"] * len(prompts)})


def logged(trainer, key: str) -> list[float]:
    return [h[key] for h in trainer.state.log_history if key in h]


def grpo(tiny_model_dir, tmp_path, reward, **cfg):
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        log_completions=True,
        use_cpu=True,
        seed=0,
        **cfg,
    )
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=reward, args=args, train_dataset=dataset())
    trainer.train()
    return trainer


@pytest.mark.smollm2
def test_grpo_two_steps_with_vllm_judge(tiny_model_dir, tmp_path, smollm2_engine):
    judge = PrometheusJudge(backend=smollm2_engine, force_verdict="always", sampling={"max_tokens": 12})
    reward = Recording(judge, name="prometheus")
    trainer = grpo(tiny_model_dir, tmp_path, reward)
    assert len(reward.calls) >= 2
    n, rewards, kwargs = reward.calls[0]
    assert n == 4 and {"log_metric", "log_extra", "trainer_state", "rubric"} <= kwargs
    assert all(r is not None and 1.0 <= r <= 5.0 for r in rewards)
    means = logged(trainer, "rewards/prometheus/mean")
    assert len(means) == 2 and all(1.0 <= m <= 5.0 for m in means)
    first_mean = sum(rewards) / len(rewards)
    assert means[0] == pytest.approx(first_mean, abs=1e-4)
    assert logged(trainer, "prometheus/mean_score") and logged(trainer, "prometheus/judge_seconds")
    assert logged(trainer, "prometheus/forced_rate")[0] == 1.0  # SmolLM2 needs forced verdicts
    feedback = list(trainer._logs["extra"]["prometheus_feedback"])
    assert len(feedback) >= 4 and any(feedback)


def test_grpo_skips_none_rewards(tiny_model_dir, tmp_path):
    """Items the judge cannot grade come back as None and TRL leaves them out of the mean."""

    count = iter(range(10**6))

    def respond(req: GenerationRequest, i: int) -> str:  # every other request fails to parse
        return "[RESULT] 5" if next(count) % 2 == 0 else "no verdict"

    reward = Recording(PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0), name="prometheus")
    trainer = grpo(tiny_model_dir, tmp_path, reward)
    returned = [r for _, rs, _ in reward.calls for r in rs]
    assert None in returned and 5.0 in returned
    means = logged(trainer, "rewards/prometheus/mean")
    assert means and all(m == 5.0 or math.isnan(m) for m in means)  # never pulled down by a fake 0
    assert any(m == 5.0 for m in means)


def test_grpo_logs_drift_diagnostics(tiny_model_dir, tmp_path):
    """Each batch's diag/... metrics reach TRL's logs as <name>/diag/... (the names OpenRLHF's extra_logs and
    verl's reward extras carry), with the values of that batch's completions and rewards."""
    from scipy.stats import spearmanr

    from tests.judges import response_of

    def respond(req: GenerationRequest, i: int) -> str:
        return f"Graded by length. [RESULT] {1 + len(response_of(req)) % 5}"

    reward = Recording(PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0), name="prometheus")
    batches: list[tuple[list[str], list[float | None], dict[str, float]]] = []
    compute = reward.compute

    def keep(prompts, completions, completion_ids=None, **kw):
        out = compute(prompts, completions, completion_ids, **kw)
        batches.append((list(completions), out, dict(reward.last_metrics)))
        return out

    reward.compute = keep
    trainer = grpo(tiny_model_dir, tmp_path, reward)
    assert len(batches) == 2  # one reward call per step, one log line per step
    for key in DIAG_KEYS:
        assert logged(trainer, f"prometheus/{key}") == pytest.approx([m[key] for _, _, m in batches]), key
    for completions, rewards, metrics in batches:
        lengths = [len(c) for c in completions]
        rho = spearmanr(rewards, lengths)[0]
        assert metrics["diag/length_spearman"] == pytest.approx(0.0 if math.isnan(rho) else rho)
        assert metrics["diag/response_chars_mean"] == pytest.approx(sum(lengths) / len(lengths))
        assert metrics["diag/top_score_share"] == sum(r == 5.0 for r in rewards) / len(rewards)
        assert metrics["diag/feedback_chars_mean"] == len("Graded by length.")


def test_grpo_awaits_the_async_reward(tiny_model_dir, tmp_path):
    backend = ScriptedBackend(respond=lambda req, i: "[RESULT] 3")
    reward = AsyncPrometheusReward(PrometheusJudge(backend=backend), name="prometheus")
    trainer = grpo(tiny_model_dir, tmp_path, reward)
    assert logged(trainer, "rewards/prometheus/mean") == [3.0, 3.0]
    assert len(backend.calls) >= 2


@pytest.mark.smollm2
@pytest.mark.slow  # RLOO with a real judge runs in make test as tests/examples/test_examples.py (rloo --smoke)
def test_rloo_two_steps_with_vllm_judge(tiny_model_dir, tmp_path, smollm2_engine):
    from trl import RLOOConfig, RLOOTrainer

    judge = PrometheusJudge(backend=smollm2_engine, force_verdict="always", sampling={"max_tokens": 12})
    reward = Recording(judge, name="prometheus")
    args = RLOOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    trainer = RLOOTrainer(model=str(tiny_model_dir), reward_funcs=reward, args=args, train_dataset=dataset())
    trainer.train()
    assert len(reward.calls) >= 2
    rewards = [r for _, rs, _ in reward.calls for r in rs]
    assert all(r is not None and 1.0 <= r <= 5.0 for r in rewards)
    assert logged(trainer, "prometheus/mean_score")
    assert any(k.startswith("rewards/prometheus") for h in trainer.state.log_history for k in h)


def test_in_process_engine_reward_refuses_to_pickle_with_a_fix(vllm_engine):
    reward = PrometheusReward(PrometheusJudge(backend=vllm_engine))
    with pytest.raises(PromRewardError, match="judge=dict"):
        pickle.dumps(reward)
