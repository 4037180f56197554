"""A checklist reward inside a real TRL GRPO step, judged by a real vLLM engine on CPU (SmolLM2)."""

from __future__ import annotations

import pytest

from prom_reward import PrometheusJudge
from prom_reward.rewards.reward import PrometheusReward

pytestmark = pytest.mark.integration

PROMPTS = ["Name a colour.", "What is 3 + 4?"]
CHECKLISTS = [
    [{"criterion": "Names a colour", "weight": 2.0, "category": "essential"},
     {"criterion": "Is rude", "weight": 1.0, "category": "pitfall"}],
    [{"criterion": "Says 7", "weight": 2.0, "category": "essential"},
     {"criterion": "Is one short sentence", "weight": 1.0, "category": "optional"}],
]  # fmt: skip


class Recording(PrometheusReward):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[tuple[list, list[float | None]]] = []

    def compute(self, prompts, completions, completion_ids=None, **kwargs):
        out = super().compute(prompts, completions, completion_ids, **kwargs)
        self.calls.append((list(kwargs.get("checklist") or []), out))
        return out


@pytest.mark.smollm2
def test_grpo_step_with_a_checklist_column_and_a_vllm_judge(tiny_model_dir, tmp_path, smollm2_engine):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    judge = PrometheusJudge(backend=smollm2_engine, force_verdict="always", sampling={"max_tokens": 8})
    reward = Recording(judge, name="prometheus", normalize="unit")
    data = Dataset.from_dict({"prompt": PROMPTS * 2, "checklist": CHECKLISTS * 2})
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=reward, args=args, train_dataset=data)
    trainer.train()
    checklists, rewards = reward.calls[0]
    assert len(checklists) == 4 and checklists[0][0]["criterion"] in {"Names a colour", "Says 7"}
    assert all(r is None or -1.0 <= r <= 1.0 for r in rewards) and any(r is not None for r in rewards)
    logs = {k: v for h in trainer.state.log_history for k, v in h.items()}
    assert 1.0 <= logs["prometheus/checklist_judgments"] <= 8.0  # 4 completions x 2 criteria, deduplicated
    assert 0.0 <= logs["prometheus/checklist_pass_rate"] <= 1.0
    assert "prometheus/checklist_essential_pass_rate" in logs
    assert logs["prometheus/judge_calls"] == 1.0  # every criterion of the batch in one judge call
