"""Supervised fine-tuning of a judge expert with TRL's ``SFTTrainer``: ``python -m train_judge.sft CONFIG.yaml``.

The data are rendered by ``train_judge.examples`` exactly as the judge will be prompted, tokenized here
(``input_ids`` + ``completion_mask``), so the loss falls on the judge's output tokens only
(``completion_only_loss``). LoRA when the config has a ``lora`` section, else a full fine-tune; on
GPU, bf16 and gradient checkpointing; for ZeRO-3 run under ``accelerate launch`` with
``train_judge/configs/accelerate_zero3.yaml``. Re-running the same command resumes from the last
``checkpoint-*`` in ``output_dir``. The final model (or LoRA adapter) and tokenizer are saved in
``output_dir``, with ``train_judge_run.json`` (config, example counts).

Shell::

    python -m train_judge.sft train_judge/configs/pocket_absolute.yaml --output-dir /work/pocket/absolute
    accelerate launch --config_file train_judge/configs/accelerate_zero3.yaml \\
        -m train_judge.sft train_judge/configs/prometheus2_7b.yaml

Example (no training: the subset selection):
    >>> pick_subset([3, 3, 5, 1], ["4", "4", "5", "1"], 2, balance=True, prefer_short=True, seed=0)
    [3, 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prom_reward.cli.voice import PlainHelpFormatter
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.format.wire import get_wire_format, template_accepts_system

from .balance import balance_by_verdict
from .config import SFTRunConfig, load_config
from .data import FeedbackRecord, PairRecord, verdict_of
from .examples import to_example, tokenize_example
from .layouts import load_feedback_collection, load_preference_collection

log = logging.getLogger(__name__)
RUN_FILE = "train_judge_run.json"


def default_vicuna_path() -> Path:
    """``benchmarks/data/vicuna_eval.json`` of the repository checkout this package runs from (an installed
    wheel has no benchmark data: pass ``data_path`` / ``--vicuna`` there)."""
    return Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "vicuna_eval.json"


def load_records(cfg: SFTRunConfig) -> list[FeedbackRecord] | list[PairRecord]:
    """The training records the config names (pocket train split, or a collection), resampled by
    ``verdict_balance`` when set."""
    pocket = None
    if cfg.dataset == "pocket":
        from .pocket import PocketData

        pocket = PocketData(cfg.data_path or default_vicuna_path(), dev_fraction=cfg.dev_fraction, seed=cfg.split_seed)
    if cfg.task == "absolute":
        records: list[Any] = (
            pocket.absolute("train") if pocket else load_feedback_collection(cfg.data_path or cfg.dataset)
        )
    else:
        records = pocket.relative("train") if pocket else load_preference_collection(cfg.data_path or cfg.dataset)
    return records if cfg.verdict_balance is None else balance_by_verdict(records, cfg.verdict_balance, seed=cfg.seed)


def pick_subset(
    lengths: Sequence[int], verdicts: Sequence[str], n: int, *, balance: bool, prefer_short: bool, seed: int
) -> list[int]:
    """Indices of ``n`` examples: round-robin over verdicts when ``balance`` (a verdict that runs out
    leaves its share to the others), shortest first within a verdict when ``prefer_short``, else in a
    seeded random order."""
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    if prefer_short:
        order.sort(key=lambda i: lengths[i])
    if not balance:
        return order[:n]
    queues: dict[str, list[int]] = {}
    for i in order:
        queues.setdefault(verdicts[i], []).append(i)
    keys = sorted(queues)
    picked: list[int] = []
    while len(picked) < n and any(queues.values()):
        for k in keys:
            if queues[k] and len(picked) < n:
                picked.append(queues[k].pop(0))
    return picked


def build_dataset(cfg: SFTRunConfig, tokenizer: Any) -> tuple[Any, dict[str, int]]:
    """The tokenized training set (a ``datasets.Dataset``) and counts for the run file."""
    import datasets

    records = load_records(cfg)
    if not records:
        raise ConfigError(f"no training records in {cfg.data_path or cfg.dataset}; give a file with rows")
    rows, verdicts, dropped = [], [], 0
    wire = get_wire_format(cfg.wire)
    system_role = template_accepts_system(tokenizer) if wire.uses_chat_template else None
    for r in records:
        ex = to_example(r)
        row = tokenize_example(ex, tokenizer, cfg.wire, max_length=cfg.max_length, system_role=system_role)
        if row is None:
            dropped += 1
            continue
        rows.append(row)
        verdicts.append(verdict_of(r))
    if not rows:
        raise ConfigError(f"no training example fits max_length={cfg.max_length} ({dropped} dropped); raise it")
    if cfg.max_examples is not None and cfg.max_examples < len(rows):
        idx = pick_subset(
            [len(r["input_ids"]) for r in rows],
            verdicts,
            cfg.max_examples,
            balance=cfg.balance_verdicts,
            prefer_short=cfg.prefer_short,
            seed=cfg.seed,
        )
        rows = [rows[i] for i in idx]
        verdicts = [verdicts[i] for i in idx]
    counts: dict[str, int] = {
        "records": len(records),
        "dropped_too_long": dropped,
        "examples": len(rows),
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "completion_tokens": sum(sum(r["completion_mask"]) for r in rows),
    }
    for v in sorted(set(verdicts)):
        counts[f"verdict_{v}"] = verdicts.count(v)
    return datasets.Dataset.from_list(rows), counts


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-*`` folder in ``output_dir`` (None when there is none).

    The Trainer writes ``trainer_state.json`` last, so a checkpoint without a readable one was cut short
    (a run killed while saving): it is skipped, with a warning, and the one before it resumes."""
    out = Path(output_dir)
    if not out.is_dir():
        return None
    steps = sorted(
        (int(m[1]), d) for d in out.iterdir() if d.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", d.name))
    )
    for _, d in reversed(steps):
        try:
            json.loads((d / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("skipping %s: no complete trainer_state.json (stopped while saving?)", d)
            continue
        return str(d)
    return None


def sft_args(cfg: SFTRunConfig) -> Any:
    """The TRL ``SFTConfig`` for ``cfg``."""
    import torch
    from trl import SFTConfig

    return SFTConfig(
        output_dir=cfg.output_dir,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=float(cfg.warmup_ratio),
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        gradient_checkpointing=cfg.gradient_checkpointing,
        bf16=cfg.bf16,
        max_length=cfg.max_length,
        packing=cfg.packing,
        padding_free=cfg.padding_free,
        completion_only_loss=True,
        seed=cfg.seed,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        deepspeed=cfg.deepspeed,
        report_to="none",
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
    )


def make_trainer(cfg: SFTRunConfig) -> tuple[Any, Any, dict[str, int | str]]:
    """(``SFTTrainer``, tokenizer, data counts) for ``cfg``, ready to ``train()``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from prom_reward.core.presets import resolve_model_path

    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    model_path = resolve_model_path(cfg.model)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dataset, counts = build_dataset(cfg, tokenizer)
    log.info("training data: %s", counts)
    peft_config = None
    if cfg.lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,  # type: ignore[arg-type]  # peft scales by any number alpha / r
            lora_dropout=cfg.lora.dropout,
            target_modules=list(cfg.lora.target_modules),
            task_type="CAUSAL_LM",
        )
    dtype = ("bfloat16" if cfg.bf16 else "float32") if cfg.dtype == "auto" else cfg.dtype
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype),
        args=sft_args(cfg),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    return trainer, tokenizer, {**counts, "base_model_path": model_path}


def train(cfg: SFTRunConfig) -> Path:
    """Run (or resume) the SFT run; returns ``output_dir`` holding the final model or adapter."""
    trainer, tokenizer, counts = make_trainer(cfg)
    model_path = counts.pop("base_model_path")
    resume = last_checkpoint(cfg.output_dir)
    if resume:
        log.info("resuming from %s", resume)
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - t0
    trainer.save_model(cfg.output_dir)
    tokenizer.save_pretrained(cfg.output_dir)
    run = {
        "config": dataclasses.asdict(cfg),
        "base_model_path": model_path,
        "data": counts,
        "resumed_from": resume,
        "train_seconds": round(seconds, 1),
        "global_step": trainer.state.global_step,
        "train_loss": result.training_loss,
        "log_history": trainer.state.log_history,
    }
    Path(cfg.output_dir, RUN_FILE).write_text(json.dumps(run, indent=1, default=str), encoding="utf-8")
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m train_judge.sft",
        description=__doc__.split("\n\n")[0],
        formatter_class=PlainHelpFormatter,
    )
    ap.add_argument("config", type=Path, help="YAML config (see train_judge/configs/)")
    ap.add_argument("--output-dir", default=None, help="override output_dir")
    ap.add_argument("--max-examples", type=int, default=None, help="override max_examples")
    ap.add_argument("--max-steps", type=int, default=None, help="override max_steps")
    ap.add_argument("--threads", type=int, default=None, help="override torch_threads")
    ap.add_argument("--data-path", default=None, help="override data_path")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        cfg = load_config(
            args.config,
            output_dir=args.output_dir,
            max_examples=args.max_examples,
            max_steps=args.max_steps,
            torch_threads=args.threads,
            data_path=args.data_path,
        )
        print(train(cfg))
    except PromRewardError as e:  # bad config or data: said in one message, exit status 2 as the merge CLI
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
