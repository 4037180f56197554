"""Online DPO with a Prometheus judge picking the chosen completion of each pair.

TRL 1.16's ``trl.experimental.online_dpo.OnlineDPOTrainer`` samples two completions per prompt
and asks its reward functions which one is chosen. ``OnlineDPOJudgeReward`` answers with the
judge's pairwise mode in both orders: 1.0 for the winner, 0.0 for the loser; pairs the judge
cannot separate are re-judged, then settled by P(A) or a seeded coin (never "first wins").

Smoke test on CPU (tiny random policy, SmolLM2-135M judge with forced verdicts on the embedded
vLLM engine, 2 steps, about 2 minutes on 2 cores):

    python rlhf_examples/online_dpo_prometheus.py --smoke   # or: python -m rlhf_examples.online_dpo_prometheus --smoke

It prints ``SUMMARY {json}`` (steps, losses, the chosen-minus-rejected reward margins, which are
1.0 when every pair has a winner) and ``PAIRWISE {json}`` (the reward's counters: pairs decided
by the judge, tie rounds, decisions by P(A), coin flips, swap agreement, judge failures).

Real recipe on one 8-GPU node: the judge on GPUs 4-7 as four dedicated vLLM servers (one
Prometheus-7B replica each), the policy trained on GPUs 0-3 with DeepSpeed ZeRO-3. Every rank
sends its pairs to the servers through ``PrometheusJudge(backend="openai", base_url=[...])``:

    prom-reward serve --model prometheus-7b-v2.0 --gpus 4,5,6,7 --port 8204 &   # ports 8204-8207
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch --config_file rlhf_examples/accelerate_zero3.yaml \\
        -m rlhf_examples.online_dpo_prometheus --policy Qwen/Qwen2.5-1.5B-Instruct \\
        --judge-server http://127.0.0.1:8204/v1 --judge-server http://127.0.0.1:8205/v1 \\
        --judge-server http://127.0.0.1:8206/v1 --judge-server http://127.0.0.1:8207/v1 \\
        --batch-size 8 --max-new-tokens 256 --max-steps 500 --output-dir outputs/online_dpo_prometheus

Pass ``--dataset prompts.jsonl`` for your own prompts (a ``prompt`` column of strings or message
lists; optional per-row ``rubric`` and ``reference_answer`` columns are used by the reward).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

if not __package__:  # run as a file, python rlhf_examples/online_dpo_prometheus.py: import from this checkout
    import _checkout  # noqa: F401

from prom_reward.cli.voice import PlainDescriptionFormatter
from rlhf_examples.common import add_common_args, make_judge, policy_path, prompts_dataset, smoke_env, summary

NAME = "prometheus_pairwise"


def load_prompts(args: argparse.Namespace) -> Any:
    """``--dataset`` (a json/jsonl/parquet file or a hub dataset), else the built-in prompts."""
    if not args.dataset:
        return prompts_dataset(args, repeat=2)
    from datasets import load_dataset

    path = str(args.dataset)
    kind = "parquet" if path.endswith(".parquet") else "json" if path.endswith((".json", ".jsonl")) else None
    data = load_dataset(kind, data_files=path, split="train") if kind else load_dataset(path, split=args.split)
    if "prompt" not in data.column_names:
        raise SystemExit(f"{path}: needs a 'prompt' column, has {data.column_names}")
    return data


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=PlainDescriptionFormatter)
    add_common_args(ap)
    ap.add_argument("--dataset", help="prompts: a .json/.jsonl/.parquet file or a hub dataset name")
    ap.add_argument("--split", default="train", help="split of a hub --dataset")
    ap.add_argument("--batch-size", type=int, default=None, help="prompts per device and step (2 completions each)")
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--learning-rate", type=float, default=5e-7)
    ap.add_argument("--max-tie-rounds", type=int, default=3)
    args = ap.parse_args(argv)
    smoke_env()
    from transformers import AutoTokenizer
    from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

    from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward

    judge = make_judge(args)
    reward = OnlineDPOJudgeReward(judge, rubric=args.rubric, max_tie_rounds=args.max_tie_rounds, name=NAME)
    policy = policy_path(args)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    smoke = args.smoke
    config = OnlineDPOConfig(
        output_dir=args.output_dir or "outputs/online_dpo_prometheus",
        max_steps=args.max_steps or (2 if smoke else 500),
        per_device_train_batch_size=args.batch_size or (2 if smoke else 8),
        max_new_tokens=args.max_new_tokens or (12 if smoke else 256),
        beta=args.beta,
        learning_rate=args.learning_rate,
        logging_steps=1,
        report_to="none",
        save_strategy="no" if smoke else "steps",
        seed=0,
        # device_map=None: each rank holds (its ZeRO-3 shard of) the policy; "auto" would spread it over all GPUs
        model_init_kwargs={"dtype": "float32" if smoke else "bfloat16", "device_map": None},
        **({"use_cpu": True, "bf16": False, "gradient_checkpointing": False} if smoke else {}),
    )
    trainer = OnlineDPOTrainer(
        model=policy, reward_funcs=reward, args=config, train_dataset=load_prompts(args), processing_class=tokenizer
    )
    reward.attach(trainer)  # OnlineDPO passes no log_metric: the reward's metrics join the trainer's logs
    try:
        trainer.train()
        if not smoke:
            trainer.save_model(config.output_dir)
    finally:
        judge.close()
    line = summary("online_dpo", trainer, "objective/scores_margin")
    stats = {
        **reward.stats.as_dict(),
        "forced_verdicts": judge.stats.forced,
        "judge_seconds": round(judge.stats.seconds, 2),
    }
    if trainer.accelerator.is_main_process:
        print("PAIRWISE " + json.dumps(stats), flush=True)
    return {**line, "pairwise": stats}


if __name__ == "__main__":  # vLLM starts its workers with spawn
    main()
