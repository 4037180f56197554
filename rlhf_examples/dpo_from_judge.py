"""Offline DPO on preference pairs made by a Prometheus judge.

Three stages, in one process or split across machines:

1. sample: the policy writes ``--num-completions`` completions per prompt (transformers
   ``generate``, temperature 1.0) into ``OUTPUT_DIR/completions.jsonl``;
2. judge: ``prom_reward.jobs.run.pairs_file`` (what ``prom-reward pairs`` runs) turns them into pairs
   in ``OUTPUT_DIR/pairs.jsonl`` (best-vs-worst by absolute grade, ties re-sampled at temperature 1.0;
   or ``--strategy all_pairs``: every pair judged in both orders), committed batch by batch and
   resumable with ``--resume``;
3. train: TRL 1.16 ``DPOTrainer`` on ``prompt``/``chosen``/``rejected`` (conversational rows).

Smoke test on CPU (tiny random Llama policy, SmolLM2-135M-Instruct judge on the embedded vLLM
engine with forced verdicts, 2 DPO steps; a couple of minutes on 2 cores):

    python rlhf_examples/dpo_from_judge.py --smoke     # or: python -m rlhf_examples.dpo_from_judge --smoke

It prints ``PAIRS {json}`` (``n_pairs``, judge failures, skips by reason, tie rounds, forced verdicts, judge time)
and ``SUMMARY {json}`` (steps, DPO losses, reward margins, ``finite``).

Real recipe on one 8-GPU node: the judge on GPUs 4-7 as four dedicated vLLM servers, sampling and
judging from one process on GPU 0, then DPO on GPUs 0-3 with DeepSpeed ZeRO-3:

    prom-reward serve --model prometheus-7b-v2.0 --gpus 4,5,6,7 --port 8204 &   # ports 8204-8207
    CUDA_VISIBLE_DEVICES=0 python -m rlhf_examples.dpo_from_judge --policy Qwen/Qwen2.5-1.5B-Instruct \\
        --dataset prompts.jsonl --num-completions 4 --max-new-tokens 512 --pairs-only --resume \\
        --judge-server http://127.0.0.1:8204/v1 --judge-server http://127.0.0.1:8205/v1 \\
        --judge-server http://127.0.0.1:8206/v1 --judge-server http://127.0.0.1:8207/v1 \\
        --output-dir outputs/dpo_from_judge
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch --config_file rlhf_examples/accelerate_zero3.yaml \\
        -m rlhf_examples.dpo_from_judge --policy Qwen/Qwen2.5-1.5B-Instruct \\
        --pairs outputs/dpo_from_judge/pairs.jsonl --output-dir outputs/dpo_from_judge

Without servers, ``--judge prometheus-eval/prometheus-7b-v2.0`` runs the judge in-process on vLLM
(after sampling, so policy and judge never share the GPU). The same pairs can be made from the
shell: ``prom-reward pairs completions.jsonl -o pairs.jsonl --rubric helpfulness --server URL``.
``--dataset`` is a .jsonl/.json/.parquet file with a ``prompt`` column (strings or message lists).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

if not __package__:  # run as a file, python rlhf_examples/dpo_from_judge.py: import from this checkout
    import _checkout  # noqa: F401

from prom_reward.cli.voice import PlainDescriptionFormatter
from rlhf_examples.common import PROMPTS, add_common_args, make_judge, policy_path, smoke_env, summary

NAME = "dpo_from_judge"


def load_prompts(args: argparse.Namespace) -> list[list[dict[str, str]]]:
    """Prompts as message lists: ``--dataset``'s ``prompt`` column, else the built-in prompts."""
    from prom_reward.jobs.source import read_rows

    raw = [r["prompt"] for r in read_rows(args.dataset)] if args.dataset else list(PROMPTS)
    return [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in raw]


def sample_completions(
    policy: str, prompts: list[list[dict[str, str]]], k: int, max_new_tokens: int, batch_size: int, seed: int
) -> list[dict[str, Any]]:
    """``k`` sampled completions per prompt from the policy, as conversational rows."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = AutoTokenizer.from_pretrained(policy)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=dtype).to(device).eval()
    rows = []
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in batch]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=k,
                pad_token_id=tok.pad_token_id,
            )
        decoded = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        for i, messages in enumerate(batch):
            samples = decoded[i * k : (i + 1) * k]
            rows.append(
                {"prompt": messages, "completions": [[{"role": "assistant", "content": t.strip()}] for t in samples]}
            )
    del model
    return rows


def build_pairs(args: argparse.Namespace, out_dir: Path) -> Any:
    """Stages 1 and 2: sample (or reuse ``completions.jsonl`` with --resume) and judge into pairs."""
    from datasets import Dataset

    from prom_reward.jobs.parts import write_rows
    from prom_reward.jobs.run import pairs_file
    from prom_reward.jobs.source import read_rows

    completions = out_dir / "completions.jsonl"
    if not (args.resume and completions.exists()):
        smoke = args.smoke
        rows = sample_completions(
            policy_path(args),
            load_prompts(args),
            args.num_completions or (3 if smoke else 4),
            args.max_new_tokens or (16 if smoke else 512),
            args.gen_batch_size,
            seed=0,
        )
        write_rows(completions, [rows])
    judge = make_judge(args)
    try:
        stats = pairs_file(
            completions,
            out_dir / "pairs.jsonl",
            judge,
            rubric=args.rubric,
            strategy=args.strategy,
            min_margin=args.min_margin,
            max_tie_rounds=args.max_tie_rounds,
            resume=args.resume,
            overwrite=not args.resume,
            progress=False,
        )
    finally:
        judge.close()
    ds = Dataset.from_list(list(read_rows(out_dir / "pairs.jsonl")))
    line = {
        "n_pairs": len(ds),
        "rows": stats.rows + stats.resumed_rows,
        "failed": stats.failed,
        "skipped": stats.skipped,
        "tie_rounds": stats.tie_rounds,
        "forced_verdicts": judge.stats.forced,
        "judge_seconds": round(judge.stats.seconds, 2),
        "pairs_file": str(out_dir / "pairs.jsonl"),
    }
    print("PAIRS " + json.dumps(line), flush=True)
    return ds


def train(args: argparse.Namespace, pairs: Any, out_dir: Path) -> dict[str, Any]:
    """Stage 3: DPO on the pairs."""
    from trl import DPOConfig, DPOTrainer

    smoke = args.smoke
    config = DPOConfig(
        output_dir=str(out_dir / "policy"),
        max_steps=args.max_steps or (2 if smoke else -1),
        per_device_train_batch_size=args.batch_size or (2 if smoke else 4),
        gradient_accumulation_steps=1 if smoke else 8,
        learning_rate=args.learning_rate,
        beta=args.beta,
        max_length=128 if smoke else 2048,
        logging_steps=1 if smoke else 10,
        report_to="none",
        save_strategy="no" if smoke else "epoch",
        seed=0,
        # device_map=None: each rank holds (its ZeRO-3 shard of) the policy
        model_init_kwargs={"dtype": "float32" if smoke else "bfloat16", "device_map": None},
        **({"use_cpu": True, "bf16": False} if smoke else {"bf16": True}),
    )
    trainer = DPOTrainer(model=policy_path(args), args=config, train_dataset=pairs)
    trainer.train()
    if not smoke:
        trainer.save_model(config.output_dir)
    line = summary(NAME, trainer, "rewards/margins")
    return {**line, "n_pairs": len(pairs)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=PlainDescriptionFormatter)
    add_common_args(ap)
    ap.add_argument("--dataset", help="prompts: a .json/.jsonl/.parquet file with a 'prompt' column")
    ap.add_argument("--num-completions", type=int, default=None, help="completions per prompt (3 in --smoke, else 4)")
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--gen-batch-size", type=int, default=8, help="prompts per generate call")
    ap.add_argument("--strategy", default="best_vs_worst", choices=["best_vs_worst", "all_pairs"])
    ap.add_argument("--min-margin", type=float, default=0.0)
    ap.add_argument("--max-tie-rounds", type=int, default=3)
    ap.add_argument("--resume", action="store_true", help="reuse completions.jsonl and continue pairs.jsonl")
    ap.add_argument("--pairs-only", action="store_true", help="stop after writing pairs.jsonl")
    ap.add_argument("--pairs", help="train on this pairs .jsonl (skip sampling and judging)")
    ap.add_argument("--batch-size", type=int, default=None, help="pairs per device and step")
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--learning-rate", type=float, default=5e-7)
    args = ap.parse_args(argv)
    smoke_env()
    out_dir = Path(args.output_dir or f"outputs/{NAME}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.pairs:
        from datasets import Dataset

        from prom_reward.jobs.source import read_rows

        pairs = Dataset.from_list(list(read_rows(args.pairs)))
    else:
        pairs = build_pairs(args, out_dir)
    if args.pairs_only:
        return {"n_pairs": len(pairs)}
    if len(pairs) == 0:
        raise SystemExit("the judge produced no pairs (all tied or failed); see pairs.skipped.jsonl")
    return train(args, pairs, out_dir)


if __name__ == "__main__":  # vLLM starts its workers with spawn
    main()
