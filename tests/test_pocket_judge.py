"""The shipped pocket judge: the packaged update applied to the real SmolLM2-135M-Instruct (as
``make setup`` does), its preset, and the real vLLM engine grading with it: the judge writes
``Feedback: ... [RESULT] k`` itself, with no forced verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from prom_reward.pocket_judge import build_judge_folder, ensure_pocket_judge, pocket_adapter_dir
from prom_reward.presets import get_preset, resolve_model_path


@pytest.fixture(scope="module")
def pocket_dir(smollm2_dir: Path) -> Path:
    return ensure_pocket_judge()


def test_the_adapter_ships_with_its_provenance() -> None:
    meta = json.loads((pocket_adapter_dir() / "adapter.json").read_text())
    assert meta["base_model"] == "local:smollm2" and meta["rank"] == 16 and meta["modules"] == 210
    assert meta["min_energy_kept"] == 1.0  # a rank-16 LoRA shipped at rank 16: exact up to bf16
    assert "pocket_absolute_gpu.yaml" in meta["recipe"]


def test_setup_folder_is_base_plus_update(pocket_dir: Path, smollm2_dir: Path, tmp_path: Path) -> None:
    assert resolve_model_path("local:pocket-judge") == str(pocket_dir)
    base = load_file(str(smollm2_dir / "model.safetensors"))
    tuned = load_file(str(pocket_dir / "model.safetensors"))
    update = load_file(str(pocket_adapter_dir() / "adapter.safetensors"))
    q = "model.layers.0.self_attn.q_proj.weight"
    want = base[q].float() + update[q + ".lora_B"].float() @ update[q + ".lora_A"].float()
    assert torch.allclose(tuned[q].float(), want.to(torch.bfloat16).float())
    assert not torch.equal(tuned[q], base[q])
    assert torch.equal(tuned["model.embed_tokens.weight"], base["model.embed_tokens.weight"])  # not adapted
    again = build_judge_folder(smollm2_dir, pocket_adapter_dir(), tmp_path / "again")
    assert torch.equal(load_file(str(again / "model.safetensors"))[q], tuned[q])


def test_preset_does_not_force_verdicts() -> None:
    p = get_preset("pocket-judge")
    assert p.model == "local:pocket-judge" and p.wire == "chat"
    assert not p.judge.get("force_verdict") and p.judge["sampling"]["max_tokens"] == 512


def test_pocket_judge_writes_the_format_itself(pocket_dir: Path, shared_dir: Path) -> None:
    """Three dev-split responses (prompts the judge never trained on), graded on the real engine at
    the paper's sampling: each output parses to ``[RESULT] k`` without forcing."""
    from prom_reward import PrometheusJudge
    from train_judge.pocket import PocketData

    dev = PocketData(shared_dir / "data" / "vicuna_eval.json").dev_items()[:3]
    judge = PrometheusJudge("pocket-judge", max_model_len=4096, enforce_eager=True, seed=0,
                            truncate_response=True)
    try:
        grades = judge.grade([d.instruction for d in dev], [d.response for d in dev], [d.rubric for d in dev],
                             [d.reference_answer for d in dev])
    finally:
        judge.close()
    assert judge.stats.forced == 0
    graded = [g for g in grades if g.score is not None]
    assert len(graded) >= 2, [g.samples[0].text[-200:] for g in grades]
    for g in graded:
        assert g.score in (1, 2, 3, 4, 5) and not g.forced
        assert len(g.feedback) > 40 and "[RESULT]" not in g.feedback
        assert any(f"[RESULT] {int(g.score)}" in s.text for s in g.samples)
