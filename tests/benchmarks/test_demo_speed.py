"""benchmarks.demo_speed: its table format, and the float32 pocket judge it compares with (the pre-bf16 form)."""

from __future__ import annotations

import json
from pathlib import Path

import benchmarks.demo_speed as demo_speed


def test_float32_pocket_is_the_shipped_merge_in_float32(tmp_path: Path, smollm2_dir: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from prom_reward.local.models import ensure_pocket_judge

    f32 = demo_speed.float32_pocket(tmp_path)
    assert json.loads((f32 / "config.json").read_text())["dtype"] == "float32"
    a, b = load_file(str(f32 / "model.safetensors")), load_file(str(ensure_pocket_judge() / "model.safetensors"))
    assert a.keys() == b.keys() and {t.dtype for t in a.values()} == {torch.float32}
    q = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(a[q].to(torch.bfloat16), b[q])  # what vLLM served from the float32 folder is the bf16 one
