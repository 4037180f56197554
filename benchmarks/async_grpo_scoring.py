"""What TRL's async GRPO score loop gives a judge: one group at a time vs. groups in flight vs. one call.

TRL 1.16's ``AsyncRolloutWorker`` scores in ``_score_loop``, which awaits ``_score_group`` one prompt
group at a time: the judge sees ``num_generations`` items per call while the other groups wait in
the score queue. This benchmark fills that queue with ``--groups`` real rollout groups (built as
TRL's generate loop builds them: chat template, token ids, training rows) and runs TRL's own
``_score_loop`` over them, in one process and on one judge server (SmolLM2 on the vLLM CPU server
started here), three ways:

- **per group**: TRL's loop as it is (``JudgedRolloutLoop`` with ``score_groups_in_flight=1``);
- **in flight**: ``JudgedRolloutLoop`` with ``score_groups_in_flight=--in-flight``: waiting groups
  scored concurrently, their judge requests at the server together;
- **one call**: the same rollouts judged across groups by one reward call (the best the server can do).

It reports judgments/s of each, their ratios, and the judge batch sizes: the items per reward call,
and the most items in concurrent calls (what the server had at once).

Example:
    $ python -m benchmarks.async_grpo_scoring --groups 8 --num-generations 4 --max-tokens 32
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import queue
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import date
from typing import Any

from benchmarks.report import emit

RUBRIC = "helpfulness"
FILLER = "It explains each step, gives an example, and checks the result. "


def rollout_groups(tok: Any, groups: int, num_generations: int) -> list[Any]:
    """``groups`` RolloutGroups of ``num_generations`` distinct completions, built as TRL's generate loop does."""
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TurnRecord, _chain_to_sequences

    out = []
    for g in range(groups):
        prompt = [{"role": "user", "content": f"Question {g}: explain how to solve problem number {g}."}]
        prompt_ids = tok.apply_chat_template(prompt, return_dict=False, add_generation_prompt=True)
        group = RolloutGroup([], {"rubric": [RUBRIC] * num_generations}, [], [], [], [], [], 0, g, [], [])
        for k in range(num_generations):
            text = f"Answer {k} to question {g}. " + FILLER * (1 + k % 3)
            ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
            sequences, _ = _chain_to_sequences([TurnRecord(prompt_ids, ids, [-0.5] * len(ids))], uuid.uuid4().hex, 1024)
            group.prompts.append(prompt)
            group.completions.append([{"role": "assistant", "content": text}])
            group.completions_ids.append(ids)
            group.completions_sequences.append(sequences)
            group.tool_call_counts.append(0)
            group.tool_failure_counts.append(0)
            group.rollout_rewards.append(None)
        out.append(group)
    return out


class CallLog:
    """Each reward call's (start, end, items), to read the judge's batch sizes."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, int]] = []

    def sizes(self) -> list[int]:
        return [n for _, _, n in self.calls]

    def peak(self) -> int:
        """The most items in reward calls running at the same time."""
        edges = sorted([(s, n) for s, _, n in self.calls] + [(e, -n) for _, e, n in self.calls])
        now = best = 0
        for _, n in edges:
            now += n
            best = max(best, now)
        return best


def logged_reward(judge: Any, log: CallLog) -> Any:
    """An ``AsyncPrometheusReward`` on ``judge`` (options or a built judge) whose calls are recorded in ``log``."""
    from prom_reward.rewards.reward import AsyncPrometheusReward

    class Logged(AsyncPrometheusReward):
        async def __call__(self, prompts: Any, completions: Any, completion_ids: Any = None, **kw: Any) -> Any:
            start = time.perf_counter()
            out = await super().__call__(prompts, completions, completion_ids, **kw)
            log.calls.append((start, time.perf_counter(), len(prompts)))
            return out

    return Logged(judge, rubric=RUBRIC)


def score_loop(tok: Any, reward: Any, groups: list[Any], in_flight: int) -> list[Any]:
    """TRL's ``_score_loop`` (in ``JudgedRolloutLoop``) over ``groups`` already waiting; the scored samples."""
    from accelerate.state import PartialState
    from datasets import Dataset

    from prom_reward.integrations.trl_async import JudgedRolloutLoop

    PartialState()
    ctx = multiprocessing.get_context("spawn")
    buffer: queue.Queue[Any] = queue.Queue()
    loop = JudgedRolloutLoop(
        score_groups_in_flight=in_flight,
        model_name="policy",
        dataset=Dataset.from_dict({"prompt": [groups[0].prompts[0]]}),
        reward_funcs=[reward],
        processing_class=tok,
        eos_token_ids=[tok.eos_token_id],
        rollout_buffer=buffer,
        model_version_value=ctx.Value("i", 0),
        heartbeat_value=ctx.Value("d", 0.0),
        failed_event=ctx.Event(),
        exception_info_queue=queue.Queue(),
        metrics_queue=queue.Queue(),
        num_generations=len(groups[0].prompts),
        score_queue_maxsize=len(groups) + 1,
    )

    async def run() -> None:
        for g in groups:
            g.queued_at = time.monotonic()
            loop._groups_to_score.put_nowait(g)
        loop._groups_to_score.put_nowait(None)
        await loop._score_loop(stop_event=asyncio.Event())

    try:
        loop._loop.run_until_complete(run())
    finally:
        loop._tool_pool.shutdown(wait=True)
        loop._loop.close()
    samples = []
    while not buffer.empty():
        samples.append(buffer.get_nowait())
    return samples


def tokenizer(model_dir: str) -> Any:
    """The model's tokenizer with the ChatML response template TRL uses for Qwen 3 (SmolLM2 is ChatML)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_template

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.response_template = qwen3_template
    return tok


def measure(judge_url: str, model_dir: str, groups: int, num_generations: int, in_flight: int, max_tokens: int):
    """The three ways on the judge server at ``judge_url``; returns the record."""
    tok = tokenizer(model_dir)
    judge = {"backend": "openai", "base_url": judge_url, "sampling": {"max_tokens": max_tokens}}
    judge.update(force_verdict="always", max_retries=1)
    rollouts = rollout_groups(tok, groups, num_generations)
    items = groups * num_generations
    warm = CallLog()
    score_loop(tok, logged_reward(judge, warm), rollouts[:1], 1)  # warm-up: model id, template, server caches
    record: dict[str, Any] = {"benchmark": "async_grpo_scoring", "date": date.today().isoformat(), "groups": groups}
    record.update(num_generations=num_generations, in_flight=in_flight, max_tokens=max_tokens, items=items)
    for name, flight in (("per_group", 1), ("in_flight", in_flight)):
        log = CallLog()
        t = time.perf_counter()
        samples = score_loop(tok, logged_reward(judge, log), rollouts, flight)
        took = time.perf_counter() - t
        assert len(samples) == items, f"{name}: {len(samples)} samples for {items} rollouts"
        record[name] = {"s": took, "per_s": items / took, "call_sizes": log.sizes(), "peak_batch": log.peak()}
    log = CallLog()
    reward = logged_reward(judge, log)
    prompts = [p for g in rollouts for p in g.prompts]
    completions = [c for g in rollouts for c in g.completions]
    t = time.perf_counter()
    rewards = asyncio.run(reward(prompts=prompts, completions=completions, rubric=[RUBRIC] * items))
    took = time.perf_counter() - t
    assert len(rewards) == items
    record["one_call"] = {"s": took, "per_s": items / took, "call_sizes": log.sizes(), "peak_batch": log.peak()}
    record["one_call_over_per_group"] = record["one_call"]["per_s"] / record["per_group"]["per_s"]
    record["in_flight_over_per_group"] = record["in_flight"]["per_s"] / record["per_group"]["per_s"]
    return record


def run(groups: int, num_generations: int, in_flight: int, max_tokens: int) -> dict[str, Any]:
    """``measure`` on a SmolLM2 vLLM judge server started here."""
    from benchmarks.reward_server_batching import _port
    from prom_reward.backends.servers import JudgeServers, ServeConfig
    from prom_reward.backends.vllm_options import VLLMOptions
    from prom_reward.local.models import ensure_smollm2

    model = str(ensure_smollm2())
    engine = VLLMOptions(max_model_len=4096, enforce_eager=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeServers(ServeConfig(model=model, port=_port(), engine=engine, log_dir=tmp, startup_timeout=600)) as urls,
    ):
        return {
            "model": "SmolLM2-135M-Instruct",
            **measure(urls[0], model, groups, num_generations, in_flight, max_tokens),
        }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--groups", type=int, default=8, help="prompt groups waiting to be scored")
    p.add_argument("--num-generations", type=int, default=4, help="completions per group")
    p.add_argument("--in-flight", type=int, default=8, help="JudgedRolloutLoop's score_groups_in_flight")
    p.add_argument("--max-tokens", type=int, default=32, help="judge tokens per judgment")
    p.add_argument("--json", help="write the record here too")
    args = p.parse_args(argv)
    rec = run(args.groups, args.num_generations, args.in_flight, args.max_tokens)
    emit(rec, args.json)
    print(
        f"\njudgments/s: per group {rec['per_group']['per_s']:.2f}, in flight {rec['in_flight']['per_s']:.2f}, "
        f"one call {rec['one_call']['per_s']:.2f}; one call / per group {rec['one_call_over_per_group']:.2f}, "
        f"in flight / per group {rec['in_flight_over_per_group']:.2f}; peak judge batch "
        f"{rec['per_group']['peak_batch']} / {rec['in_flight']['peak_batch']} / {rec['one_call']['peak_batch']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
