"""Shipping a LoRA adapter: SVD compression (train_judge.ship) and its application to the base
(prom_reward.pocket_judge), on synthetic adapters and the tiny random Llama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import prom_reward.pocket_judge as pj
from prom_reward.errors import ConfigError
from train_judge.ship import ADAPTER_FILE, compress_adapter

KEY = "base_model.model.model.layers.0.self_attn.q_proj.lora_{}.weight"
NAME = "model.layers.0.self_attn.q_proj.weight"


def _peft_adapter(folder: Path, r: int = 4, alpha: int = 8, out: int = 64, inp: int = 64) -> tuple[Path, torch.Tensor]:
    torch.manual_seed(0)
    a, b = torch.randn(r, inp) * 0.1, torch.randn(out, r) * 0.1
    folder.mkdir(parents=True, exist_ok=True)
    save_file({KEY.format("A"): a, KEY.format("B"): b}, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"r": r, "lora_alpha": alpha}))
    return folder, (alpha / r) * b @ a


def test_compress_keeps_the_update(tmp_path: Path) -> None:
    src, delta = _peft_adapter(tmp_path / "peft")
    meta = compress_adapter(src, tmp_path / "full", rank=4)
    w = load_file(str(tmp_path / "full" / ADAPTER_FILE))
    approx = w[NAME + ".lora_B"].float() @ w[NAME + ".lora_A"].float()
    assert meta["modules"] == 1 and meta["min_energy_kept"] > 0.999
    assert torch.allclose(approx, delta, atol=2e-2 * float(delta.abs().max()))
    meta1 = compress_adapter(src, tmp_path / "r1", rank=1)
    s = torch.linalg.svdvals(delta)
    assert meta1["min_energy_kept"] == pytest.approx(float(s[0] ** 2 / (s**2).sum()), abs=1e-4)
    assert load_file(str(tmp_path / "r1" / ADAPTER_FILE))[NAME + ".lora_A"].shape == (1, 64)
    with pytest.raises(ConfigError, match="not a peft LoRA adapter"):
        compress_adapter(tmp_path, tmp_path / "x")


def test_pocket_judge_applies_the_update(tmp_path: Path, tiny_model_dir: Path, monkeypatch) -> None:
    src, delta = _peft_adapter(tmp_path / "peft")
    shipped = tmp_path / "pocket_judge"
    compress_adapter(src, shipped, rank=4)
    monkeypatch.setattr(pj, "pocket_adapter_dir", lambda: shipped)
    monkeypatch.setattr(pj, "ensure_smollm2", lambda root: tiny_model_dir)
    out = pj.ensure_pocket_judge(tmp_path / "cache")
    base = load_file(str(tiny_model_dir / "model.safetensors"))
    merged = load_file(str(out / "model.safetensors"))
    assert torch.allclose(merged[NAME].float() - base[NAME].float(), delta, atol=2e-2)
    other = "model.layers.1.mlp.down_proj.weight"
    assert torch.equal(merged[other], base[other])
    assert (out / "tokenizer.json").is_file() and (out / "config.json").is_file()
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert pj.ensure_pocket_judge(tmp_path / "cache") == out  # idempotent: not rebuilt
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    monkeypatch.setattr(pj, "pocket_adapter_dir", lambda: tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="adapter is missing"):
        pj.ensure_pocket_judge(tmp_path / "cache2")
