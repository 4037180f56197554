"""SFT of a judge expert for a few steps on the tiny random Llama (real TRL SFTTrainer, real LoRA):
finite loss, labels only on the judge output, checkpoints, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from train_judge.config import SFTRunConfig
from train_judge.sft import RUN_FILE, build_dataset, last_checkpoint, make_trainer, train


def _cfg(model: Path, out: Path, data_dir: Path, task: str = "absolute", **kw) -> SFTRunConfig:
    base = dict(
        model=str(model),
        task=task,
        output_dir=str(out),
        dataset="pocket",
        data_path=str(data_dir / "vicuna_eval.json"),
        max_length=1024,
        max_examples=4,
        prefer_short=True,
        balance_verdicts=True,
        learning_rate=1e-3,
        per_device_train_batch_size=2,
        gradient_checkpointing=False,
        max_steps=2,
        save_steps=2,
        logging_steps=1,
        torch_threads=1,
        lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    )
    base.update(kw)
    return SFTRunConfig.from_dict(base)


@pytest.mark.parametrize("task", ["absolute", "relative"])
def test_only_completion_tokens_carry_labels(tiny_model_dir: Path, data_dir: Path, tmp_path: Path, task: str) -> None:
    cfg = _cfg(tiny_model_dir, tmp_path / "o", data_dir, task, max_length=2048)
    trainer, tok, counts = make_trainer(cfg)
    assert counts["examples"] == 4
    rows, _ = build_dataset(cfg, tok)  # the same rows, before TRL folds the mask into labels
    batch = next(iter(trainer.get_train_dataloader()))
    labels, ids = batch["labels"], batch["input_ids"]
    assert labels.shape == ids.shape
    n_labelled = int((labels != -100).sum())
    in_batch = sorted(sum(r["completion_mask"]) for r in rows)
    assert n_labelled in {in_batch[i] + in_batch[j] for i in range(4) for j in range(4) if i != j}
    for row_labels, row_ids in zip(labels.tolist(), ids.tolist(), strict=True):
        kept = [(t, i) for t, i in zip(row_labels, row_ids, strict=True) if t != -100]
        assert all(t == i for t, i in kept)
        text = tok.decode([t for t, _ in kept])
        verdicts = ("1", "2", "3", "4", "5") if task == "absolute" else ("A", "B")
        assert text.rsplit("[RESULT] ", 1)[1].startswith(verdicts)  # the verdict is trained on
        assert "###Feedback:" not in text and "###Task Description" not in text  # the prompt is not
        assert kept[-1][0] == tok.eos_token_id


def test_train_checkpoint_and_resume(tiny_model_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(_cfg(tiny_model_dir, out, data_dir))
    run = json.loads((out / RUN_FILE).read_text())
    losses = [h["loss"] for h in run["log_history"] if "loss" in h]
    assert losses and all(math.isfinite(float(x)) for x in losses)
    assert run["global_step"] == 2 and run["resumed_from"] is None
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    ckpt = last_checkpoint(out)
    assert ckpt is not None and ckpt.endswith("checkpoint-2")
    # the same command with more steps continues from checkpoint-2 instead of starting over
    train(_cfg(tiny_model_dir, out, data_dir, max_steps=3))
    run2 = json.loads((out / RUN_FILE).read_text())
    assert run2["resumed_from"].endswith("checkpoint-2") and run2["global_step"] == 3
    steps = [h["step"] for h in run2["log_history"] if "loss" in h]
    assert steps[-1] == 3 and steps.count(3) == 1
    assert last_checkpoint(out).endswith("checkpoint-3")


def test_resume_skips_a_checkpoint_cut_short(tmp_path: Path) -> None:
    """A run killed while saving leaves checkpoint-N without (or with half) its trainer_state.json, which the
    Trainer writes last: the checkpoint before it resumes."""
    for step, state in ((2, "{}"), (4, None), (6, '{"global_step": 6, "log_hi'), (10, "{}")):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if state is not None:
            (d / "trainer_state.json").write_text(state)
    (tmp_path / "checkpoint-12").write_text("a file, not a checkpoint")
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    (tmp_path / "checkpoint-10" / "trainer_state.json").unlink()
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    assert last_checkpoint(tmp_path / "nowhere") is None


def test_no_records_is_said_as_such(tmp_path: Path, monkeypatch) -> None:
    """Before: 'no training example fits max_length=...; raise it', which sent users after the wrong knob."""
    import train_judge.sft as sft
    from prom_reward.errors import ConfigError

    monkeypatch.setattr(sft, "load_records", lambda cfg: [])  # a hub split with no rows
    cfg = SFTRunConfig.from_dict({"model": "m", "task": "absolute", "output_dir": str(tmp_path), "dataset": "o/d"})
    with pytest.raises(ConfigError, match="no training records in o/d; give a file with rows"):
        build_dataset(cfg, tokenizer=None)
