"""Shipping a LoRA adapter: SVD compression (train_judge.ship) and its application to the base
(prom_reward.local.pocket_judge), on synthetic adapters and the tiny random Llama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import train_judge.pocket_judge as pj
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
    out = pj.build_pocket_judge(tmp_path / "cache")
    base = load_file(str(tiny_model_dir / "model.safetensors"))
    merged = load_file(str(out / "model.safetensors"))
    assert torch.allclose(merged[NAME].float() - base[NAME].float(), delta, atol=2e-2)
    other = "model.layers.1.mlp.down_proj.weight"
    assert torch.equal(merged[other], base[other])
    assert (out / "tokenizer.json").is_file() and (out / "config.json").is_file()
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert pj.build_pocket_judge(tmp_path / "cache") == out  # idempotent: not rebuilt
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    monkeypatch.setattr(pj, "pocket_adapter_dir", lambda: tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="adapter is missing"):
        pj.build_pocket_judge(tmp_path / "cache2")


def test_lowrank_svd_matches_the_full_svd() -> None:
    from train_judge.ship import _lowrank_svd_pair, _svd_pair

    torch.manual_seed(1)
    b, a = torch.randn(96, 6), torch.randn(6, 40)
    for rank in (2, 6, 10):
        fb, fa, fkept = _svd_pair(2.0 * b @ a, rank)
        lb, la, lkept = _lowrank_svd_pair(b, a, 2.0, rank)
        assert lkept == pytest.approx(fkept, abs=1e-5)
        k = min(rank, 6)  # never more directions than the update has (the full SVD pads with zeros)
        assert lb.shape == (96, k) and la.shape == (k, 40)
        full, low = fb.float() @ fa.float(), lb.float() @ la.float()
        assert torch.allclose(low, full, atol=0.02 * float(full.abs().max()))
    assert _lowrank_svd_pair(b, a, 2.0, 6)[2] == pytest.approx(1.0, abs=1e-6)


def _copy_model(src: Path, dst: Path, change) -> Path:
    import shutil

    shutil.copytree(src, dst)
    w = load_file(str(dst / "model.safetensors"))
    change(w)
    save_file(w, str(dst / "model.safetensors"))
    return dst


def test_compress_model_recovers_a_checkpoint_update(tmp_path: Path, tiny_model_dir: Path) -> None:
    from train_judge.ship import compress_model, ship

    torch.manual_seed(2)
    other = "model.layers.1.mlp.down_proj.weight"
    base_w = load_file(str(tiny_model_dir / "model.safetensors"))
    shape = base_w[NAME].shape
    delta = torch.randn(shape[0], 2) @ torch.randn(2, shape[1]) * 0.05

    def change(w):
        w[NAME] = (w[NAME].float() + delta).to(torch.float32)
        w[other] = w[other].float()  # same values, another dtype: not an update

    tuned = _copy_model(tiny_model_dir, tmp_path / "tuned", change)
    meta = ship(tuned, tmp_path / "out", rank=2, base=tiny_model_dir)
    assert meta["source"] == "checkpoint" and meta["modules"] == 1 and meta["min_energy_kept"] > 0.99
    w = load_file(str(tmp_path / "out" / ADAPTER_FILE))
    assert set(w) == {NAME + ".lora_A", NAME + ".lora_B"}
    # the base was bf16: what the tuned fp32 copy adds is delta plus the base's own rounding (none)
    got = w[NAME + ".lora_B"].float() @ w[NAME + ".lora_A"].float()
    assert torch.allclose(got, delta, atol=0.02 * float(delta.abs().max()))
    with pytest.raises(ConfigError, match="equals its base"):
        compress_model(tiny_model_dir, tmp_path / "x", base=tiny_model_dir)

    def norm(w):
        w["model.norm.weight"] = w["model.norm.weight"] + 1

    normed = _copy_model(tiny_model_dir, tmp_path / "normed", norm)
    with pytest.raises(ConfigError, match=r"not matrices \(model.norm.weight\)"):
        compress_model(normed, tmp_path / "y", base=tiny_model_dir)
