"""Our rewards in TRL 1.16's ``AsyncRolloutWorker``: pickled into its spawned CUDA-free child, scored there.

The worker's one vLLM call (``_generate_one_turn``, the policy's sampling, which needs a GPU server TRL
syncs weights into) answers from a fixed list of real completions; everything else is TRL's own code:
``start`` (its pickle check, the spawn, ``_child_main`` scrubbing CUDA), the generate loop (chat
template, ``parse_response``, grouping by prompt), ``_score_loop`` and ``_score_group``, the queues the
trainer drains. The judge is scripted (exact rewards, a failure) or SmolLM2 on the real vLLM server.
"""

from __future__ import annotations

import math
import multiprocessing
import queue
import re
import time
from typing import Any

import pytest

from prom_reward import ConfigError, PromRewardError
from prom_reward.backends.base import GenerationRequest
from prom_reward.integrations.trl_async import JudgedRolloutLoop, TRLRolloutLoop, use_judged_loop
from prom_reward.rewards.reward import TRL_ROLLOUT_CHILD, AsyncPrometheusReward, PrometheusReward

ANSWERS = ["It is four.", "It is five.", "unsure", "It is four, since 2 + 2 = 4."]
"""The policy's completions, in turn; the scripted judge gives 5, 1, no verdict, 5."""
EXPECTED = {ANSWERS[0]: 5.0, ANSWERS[1]: 1.0, ANSWERS[2]: None, ANSWERS[3]: 5.0}
PROMPTS = ["What is 2 + 2?", "Add 2 and 2."]


def respond(request: GenerationRequest, index: int) -> str:
    """The scripted judge (module level: it travels to the child by reference)."""
    if "unsure" in request.user:
        return "I cannot tell."
    return "Right. [RESULT] 5" if "It is four" in request.user else "Wrong. [RESULT] 1"


class Canned:
    """Answers the worker's vLLM call from ``ANSWERS`` in turn (with the EOS the server would send)."""

    _turns = 0

    async def _generate_one_turn(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        text = ANSWERS[self._turns % len(ANSWERS)]
        self._turns += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.eos_token_ids[0]]  # type: ignore[attr-defined]
        return ids, [-0.5] * len(ids)


class CannedJudgedLoop(Canned, JudgedRolloutLoop):
    """Our loop (``use_judged_loop``) with the canned policy."""


class CannedTRLLoop(Canned, TRLRolloutLoop):
    """TRL's own loop with the canned policy."""


def tokenizer(smollm2_dir):
    """SmolLM2's tokenizer (ChatML) with the response template TRL uses for that format (Qwen 3's)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_template

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    tok.response_template = qwen3_template
    return tok


def run_worker(loop_cls, reward, tok, groups: int, capfd=None) -> tuple[list[Any], list[dict], str]:
    """Start TRL's worker with ``loop_cls``, take ``groups`` groups' samples, stop it; samples, metrics, stderr."""
    from accelerate.state import PartialState
    from datasets import Dataset
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker

    prompts = [[{"role": "user", "content": p}] for p in PROMPTS]
    data = Dataset.from_dict({"prompt": prompts, "rubric": ["helpfulness"] * len(prompts)})
    worker = AsyncRolloutWorker(
        model_name="policy",
        dataset=data,
        reward_funcs=[reward],
        processing_class=tok,
        eos_token_ids=[tok.eos_token_id],
        num_generations=4,
        max_inflight_tasks=8,
        score_queue_maxsize=2,
    )
    worker._loop_cls = loop_cls
    PartialState()  # the trainer's accelerator, which TRL's logging needs
    samples: list[Any] = []
    try:
        worker.start()
        deadline = time.monotonic() + 600
        while len(samples) < 4 * groups:
            worker.check_health(stale_after_s=600)
            try:
                samples.append(worker.rollout_buffer.get(timeout=1.0))
            except queue.Empty:
                assert time.monotonic() < deadline, f"{len(samples)} samples in 600 s"
    finally:
        process = worker._process
        if process is not None and worker._failed_event.is_set():
            # TRL 1.16's stop() hangs on a failed child: its mp.Event.set() waits for the dead child's stop watcher
            process.join(timeout=120)
            if not process.is_alive():
                worker._process = None
        worker.stop()
    metrics = []
    while True:
        try:
            metrics.append(worker.metrics_queue.get(timeout=0.5))
        except queue.Empty:
            break
    return samples, metrics, capfd.readouterr().err if capfd is not None else ""


def scripted_reward(cls=AsyncPrometheusReward):
    return cls({"backend": "scripted", "respond": respond}, rubric="helpfulness")


@pytest.mark.integration
@pytest.mark.parametrize("cls", [AsyncPrometheusReward, PrometheusReward])
def test_scripted_rewards_scored_by_trls_score_group_in_the_spawned_child(cls, smollm2_dir, capfd):
    samples, metrics, err = run_worker(CannedJudgedLoop, scripted_reward(cls), tokenizer(smollm2_dir), 3, capfd)
    assert len(samples) >= 12
    for s in samples:
        text = s.completion[-1]["content"]
        want = EXPECTED[text]
        got = s.metrics["rewards/prometheus"]
        assert (math.isnan(got) and want is None) or got == want, (text, got)
        if want is None:  # a judge without a verdict: no reward, no advantage (TRL's NaN)
            assert math.isnan(s.metrics["reward"]) and s.advantage == 0.0
    # the judge's metrics reach the queue the trainer drains in log(); its failure reasons the worker's log
    ours = [m for m in metrics if "prometheus/abstain_rate" in m]
    assert len(ours) >= 3
    assert all(m["prometheus/abstain_rate"] == 0.25 and m["prometheus/failed_samples"] == 0.0 for m in ours)
    assert all(m["prometheus/judge_seconds"] >= 0.0 for m in ours)
    assert "prometheus has no reward for completion" in err
    assert "the judge gave no verdict" in err and "no '[RESULT] 1-5' verdict" in err, err[-3000:]


@pytest.mark.integration
@pytest.mark.slow  # TRL's behaviour, the reason JudgedRolloutLoop exists; the full tier (make test-all) checks it
def test_trls_own_loop_scores_our_reward_but_drops_its_metrics(smollm2_dir):
    """Why ``JudgedRolloutLoop`` exists: TRL's loop gives rewards no ``log_metric``."""
    samples, metrics, _ = run_worker(CannedTRLLoop, scripted_reward(), tokenizer(smollm2_dir), 2)
    assert {EXPECTED[s.completion[-1]["content"]] for s in samples} <= {5.0, 1.0, None}
    assert sum(math.isnan(s.metrics["rewards/prometheus"]) for s in samples) >= 2
    assert metrics and not any(k.startswith("prometheus/") for m in metrics for k in m)


@pytest.mark.integration
def test_judge_served_over_http_scores_groups_in_the_child(smollm2_dir, smollm2_server, capfd):
    judge = {"backend": "openai", "base_url": smollm2_server, "sampling": {"max_tokens": 16}}
    reward = AsyncPrometheusReward({**judge, "force_verdict": "always", "max_retries": 1}, rubric="helpfulness")
    samples, metrics, _ = run_worker(CannedJudgedLoop, reward, tokenizer(smollm2_dir), 2, capfd)
    rewards = [s.metrics["rewards/prometheus"] for s in samples]
    assert all(1.0 <= r <= 5.0 for r in rewards), rewards  # forced verdicts: every completion has one
    ours = [m for m in metrics if "prometheus/judge_seconds" in m]
    assert len(ours) >= 2 and all(m["prometheus/judge_seconds"] > 0 for m in ours)
    assert all(m["prometheus/abstain_rate"] == 0.0 for m in ours)


@pytest.mark.integration
def test_in_process_vllm_judge_refused_in_the_child_with_the_fix(smollm2_dir):
    reward = AsyncPrometheusReward({"model": str(smollm2_dir)}, rubric="helpfulness")
    with pytest.raises(RuntimeError, match="child has failed") as info:
        run_worker(CannedJudgedLoop, reward, tokenizer(smollm2_dir), 1)
    cause = str(info.value.__cause__)
    assert "ConfigError" in cause and "CUDA-free rollout worker child" in cause
    assert "prom-reward serve" in cause and "'backend': 'openai'" in cause


@pytest.mark.parametrize(
    ("process", "spec", "refused"),
    [
        (TRL_ROLLOUT_CHILD, {"model": "judge"}, True),
        (TRL_ROLLOUT_CHILD, {"backend": "vllm", "model": "judge"}, True),
        (TRL_ROLLOUT_CHILD, {"backend": "scripted", "outputs": ["[RESULT] 3"]}, False),
        ("MainProcess", {"backend": "scripted", "outputs": ["[RESULT] 3"]}, False),
    ],
)
def test_judge_holder_refuses_an_engine_only_in_trls_child(process, spec, refused, monkeypatch):
    monkeypatch.setattr(multiprocessing.current_process(), "name", process)
    holder = PrometheusReward(spec)
    if refused:
        with pytest.raises(PromRewardError, match="prom-reward serve"):
            _ = holder.judge
    else:
        assert holder.judge.grade(["q"], ["r"], "helpfulness")[0].score == 3.0


def test_use_judged_loop_sets_the_loop_or_says_why():
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker

    class Trainer:
        rollout_worker: Any = None

    with pytest.raises(PromRewardError, match="AsyncRolloutWorker"):
        use_judged_loop(Trainer())
    trainer = Trainer()
    trainer.rollout_worker = AsyncRolloutWorker(reward_funcs=[scripted_reward()])
    assert trainer.rollout_worker._loop_cls is TRLRolloutLoop
    use_judged_loop(trainer)
    assert trainer.rollout_worker._loop_cls is JudgedRolloutLoop
    for bad in (0, 2.5, "4", True, float("nan")):  # refused on the main process, before TRL spawns the child
        words = re.escape(f"score_groups_in_flight: expected an int >= 1, got {bad!r}; fix: give an int >= 1")
        with pytest.raises(ConfigError, match=words):
            use_judged_loop(trainer, score_groups_in_flight=bad)
