"""Shrink a trained LoRA adapter for shipping: truncated SVD of each module's update, stored in bf16.

A LoRA module adds ``scale * B @ A`` (rank r) to a weight. ``compress_adapter`` computes that update
exactly, keeps its top ``rank`` singular directions (``B' = U_k S_k``, ``A' = V_k``, scale 1) and writes
a plain file ``adapter.safetensors`` with keys ``<weight name>.lora_A`` / ``.lora_B`` plus
``adapter.json`` (base model, rank, the kept share of each update's energy). ``prom_reward.pocket_judge``
applies it to the base at ``make setup`` without peft.

Shell::

    python -m train_judge.ship /work/pocket/absolute --rank 8 --out prom_reward/assets/pocket_judge

Example (the key mapping):
    >>> base_weight_name("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")
    'model.layers.0.self_attn.q_proj.weight'
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError

ADAPTER_FILE = "adapter.safetensors"
META_FILE = "adapter.json"


def base_weight_name(peft_key: str) -> str:
    """The base model weight a peft LoRA key belongs to."""
    key = peft_key.removeprefix("base_model.model.")
    for part in (".lora_A.weight", ".lora_B.weight"):
        if key.endswith(part):
            return key[: -len(part)] + ".weight"
    raise ConfigError(f"{peft_key!r} is not a LoRA A/B weight key")


def compress_adapter(adapter_dir: str | Path, out_dir: str | Path, *, rank: int = 8,
                     base_model: str = "local:smollm2") -> dict[str, Any]:
    """Write the rank-``rank`` bf16 version of a peft LoRA adapter; returns the metadata written."""
    import torch
    from safetensors.torch import load_file, save_file

    src = Path(adapter_dir)
    cfg_path, w_path = src / "adapter_config.json", src / "adapter_model.safetensors"
    if not cfg_path.is_file() or not w_path.is_file():
        raise ConfigError(f"{src} is not a peft LoRA adapter folder (needs adapter_config.json and "
                          "adapter_model.safetensors); pass the output_dir of a LoRA SFT run")
    if rank < 1:
        raise ConfigError(f"rank must be >= 1, got {rank}")
    cfg = json.loads(cfg_path.read_text())
    scale = float(cfg["lora_alpha"]) / float(cfg["r"])
    weights = load_file(str(w_path))
    pairs: dict[str, dict[str, Any]] = {}
    for k, v in weights.items():
        pairs.setdefault(base_weight_name(k), {})["A" if ".lora_A." in k else "B"] = v.float()
    out: dict[str, Any] = {}
    kept: list[float] = []
    for name, ab in sorted(pairs.items()):
        delta = scale * ab["B"] @ ab["A"]
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        k = min(rank, s.numel())
        kept.append(float((s[:k] ** 2).sum() / (s**2).sum().clamp_min(1e-30)))
        out[name + ".lora_B"] = (u[:, :k] * s[:k]).to(torch.bfloat16).contiguous()
        out[name + ".lora_A"] = vh[:k].to(torch.bfloat16).contiguous()
    dst = Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / ADAPTER_FILE))
    meta = {"base_model": base_model, "rank": rank, "source_rank": cfg["r"], "modules": len(pairs),
            "min_energy_kept": round(min(kept), 4), "mean_energy_kept": round(sum(kept) / len(kept), 4)}
    (dst / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m train_judge.ship", description=__doc__.split("\n\n")[0])
    ap.add_argument("adapter", help="peft LoRA adapter folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--base-model", default="local:smollm2")
    args = ap.parse_args(argv)
    try:
        print(json.dumps(compress_adapter(args.adapter, args.out, rank=args.rank, base_model=args.base_model)))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
