"""Online DPO with a checklist column (issue 34, item 4): a pair whose row has a checklist is decided by its two
completions' checklist aggregates, rows without one by the pairwise verdict, in the same batch; equal aggregates
and bad checklists go to the coin, counted; through TRL 1.16's own ``OnlineDPOTrainer`` too."""

from __future__ import annotations

import math

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward
from tests.judges import judge_by_format, response_of

PAIRWISE_ONLY = [n for n in JUDGE_FORMATS if "absolute" not in JUDGE_FORMATS.get(n).tasks]

GOOD, BAD = "XGOODX", "XBADX"
CHECKLIST = [{"criterion": "Is good", "category": "essential"}, "Is polite"]
BROKEN = [{"criterion": "Is good", "weight": "heavy"}]


def respond(req: GenerationRequest, i: int) -> str:
    """Pairwise: the response holding GOOD wins; a criterion: 5 when the response holds GOOD, else 1."""
    if "###Response A:" in req.user:
        return "Fine. [RESULT] " + ("A" if req.user.index(GOOD) < req.user.index(BAD) else "B")
    return "Judged. [RESULT] " + ("5" if GOOD in response_of(req) else "1")


def test_checklist_pairs_by_aggregate_plain_pairs_by_verdict_ties_and_bad_checklists_to_the_coin():
    backend = ScriptedBackend(respond=respond)
    reward = OnlineDPOJudgeReward(PrometheusJudge(backend=backend, max_retries=0), rubric="helpfulness")
    prompts = [f"Question {i}?" for i in range(4)] * 2
    first = [f"{BAD} 0", f"{GOOD} 1", f"{GOOD} 2a", f"{GOOD} 3"]
    second = [f"{GOOD} 0", f"{BAD} 1", f"{GOOD} 2b", f"{BAD} 3"]
    checklists = [CHECKLIST, None, CHECKLIST, BROKEN] * 2  # TRL passes one value per completion
    rewards = reward(prompts=prompts, completions=first + second, checklist=checklists)

    assert (rewards[0], rewards[4]) == (0.0, 1.0)  # the checklist: B holds GOOD, every criterion 5 against 1
    assert (rewards[1], rewards[5]) == (1.0, 0.0)  # no checklist: the pairwise verdict
    assert all(rewards[i] + rewards[i + 4] == 1.0 for i in range(4))
    s = reward.stats
    assert (s.pairs, s.decided_by_judge, s.coin_flips, s.unjudged_pairs, s.ties) == (4, 2, 2, 1, 1)
    graded = [response_of(r) for call in backend.calls for r in call if "###Response A:" not in r.user]
    assert sorted(graded) == sorted([f"{BAD} 0", f"{GOOD} 0", f"{GOOD} 2a", f"{GOOD} 2b"] * 2)  # 2 criteria each
    m = reward.last_metrics
    assert m["checklist_pass_rate"] == 0.75 and m["checklist_essential_pass_rate"] == 0.75
    assert m["unjudged_pairs"] == 1.0 and m["coin_flips"] == 2.0


def test_an_undecided_essential_criterion_leaves_the_pair_to_the_coin():
    def mute_on_bad(req: GenerationRequest, i: int) -> str:
        return "Hmm." if BAD in response_of(req) else "Judged. [RESULT] 5"

    reward = OnlineDPOJudgeReward(
        PrometheusJudge(backend=ScriptedBackend(respond=mute_on_bad), max_retries=0), rubric="helpfulness"
    )
    rewards = reward(prompts=["Q?", "Q?"], completions=[GOOD, BAD], checklist=[CHECKLIST, CHECKLIST])
    assert sorted(rewards) == [0.0, 1.0]
    s = reward.stats
    assert (s.decided_by_judge, s.judge_failures, s.coin_flips, s.unjudged_pairs) == (0, 1, 1, 0)


def test_online_dpo_trainer_passes_the_checklist_column(tiny_model_dir, tmp_path):
    """TRL's own trainer step: the dataset's checklist column reaches the reward, whose pairs are then decided by
    per-criterion judgments (no pairwise request), each pair rewarded 1 / 0."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

    asked: list[str] = []

    def by_length(req: GenerationRequest, i: int) -> str:  # an odd-length response satisfies the criterion
        asked.append(req.user)
        return "Judged. [RESULT] " + ("5" if len(response_of(req)) % 2 else "1")

    seen: list[tuple[int, list, list[float]]] = []

    class Recording(OnlineDPOJudgeReward):
        def __call__(self, prompts, completions, completion_ids=None, **kwargs):
            out = super().__call__(prompts, completions, completion_ids, **kwargs)
            seen.append((len(completions), list(kwargs["checklist"]), out))
            return out

    reward = Recording(PrometheusJudge(backend=ScriptedBackend(respond=by_length), max_retries=0), rubric="helpfulness")
    data = Dataset.from_dict({"prompt": ["Name a colour.", "Say hello."] * 2, "checklist": [["Is odd"]] * 4})
    args = OnlineDPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_new_tokens=8,
        max_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = OnlineDPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32),
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    trainer.train()
    assert seen and all(math.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)
    for n, checklists, rewards in seen:
        assert checklists == [["Is odd"]] * n
        assert all(rewards[i] + rewards[n // 2 + i] == 1.0 for i in range(n // 2))
    assert asked and all("Is odd" in user and "###Response A:" not in user for user in asked)
    s = reward.stats
    assert s.pairs == sum(n // 2 for n, _, _ in seen) == s.decided_by_judge + s.coin_flips and s.unjudged_pairs == 0
    assert "checklist_pass_rate" in reward.last_metrics


@pytest.mark.parametrize("fmt", PAIRWISE_ONLY)
def test_a_checklist_in_a_format_that_cannot_grade_is_refused_before_anything_is_judged(fmt):
    seen: list[GenerationRequest] = []
    reward = OnlineDPOJudgeReward(judge_by_format(fmt, {}, seen=seen), rubric="helpfulness")
    with pytest.raises(ConfigError) as e:
        reward(prompts=["Q?", "Q?"], completions=[GOOD, BAD], checklist=[CHECKLIST, CHECKLIST])
    message = str(e.value)
    assert message.startswith("column 'checklist': a checklist's criteria are graded one by one, and judge format")
    assert f"{fmt!r} does not judge absolute" in message and message.endswith(", or drop the column")
    assert "point scale" not in message and seen == []  # nothing judged, not even the start-up check
