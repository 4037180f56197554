"""Shrink a trained LoRA adapter for shipping: truncated SVD of each module's update, stored in bf16.

A LoRA module adds ``scale * B @ A`` (rank r) to a weight. ``compress_adapter`` computes that update
exactly, keeps its top ``rank`` singular directions (``B' = U_k S_k``, ``A' = V_k``, scale 1) and writes
a plain file ``adapter.safetensors`` with keys ``<weight name>.lora_A`` / ``.lora_B`` plus
``adapter.json`` (base model, rank, the kept share of each update's energy). ``compress_model`` does the
same for a full fine-tuned or merged checkpoint (``model - base`` per matrix; save merges in float32 so
the difference is not bf16 rounding noise). ``train_judge.pocket_judge`` applies the file to the base at
``make setup`` without peft.

Shell::

    python -m train_judge.ship outputs/pocket/absolute --rank 16 --out train_judge/assets/pocket_judge
    python -m train_judge.ship outputs/pocket/merged-linear --base local:smollm2 --rank 16 --out DIR

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


def compress_adapter(
    adapter_dir: str | Path, out_dir: str | Path, *, rank: int = 8, base_model: str = "local:smollm2"
) -> dict[str, Any]:
    """Write the rank-``rank`` bf16 version of a peft LoRA adapter; returns the metadata written."""
    from safetensors.torch import load_file, save_file

    src = Path(adapter_dir)
    cfg_path, w_path = src / "adapter_config.json", src / "adapter_model.safetensors"
    if not cfg_path.is_file() or not w_path.is_file():
        raise ConfigError(
            f"{src} is not a peft LoRA adapter folder (needs adapter_config.json and "
            "adapter_model.safetensors); pass the output_dir of a LoRA SFT run"
        )
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
        out[name + ".lora_B"], out[name + ".lora_A"], share = _lowrank_svd_pair(ab["B"], ab["A"], scale, rank)
        kept.append(share)
    dst = Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / ADAPTER_FILE))
    meta = {
        "base_model": base_model,
        "rank": rank,
        "source_rank": cfg["r"],
        "modules": len(pairs),
        "min_energy_kept": round(min(kept), 4),
        "mean_energy_kept": round(sum(kept) / len(kept), 4),
    }
    (dst / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def _svd_pair(delta: Any, rank: int) -> tuple[Any, Any, float]:
    import torch

    u, s, vh = torch.linalg.svd(delta, full_matrices=False)
    k = min(rank, s.numel())
    kept = float((s[:k] ** 2).sum() / (s**2).sum().clamp_min(1e-30))
    return (u[:, :k] * s[:k]).to(torch.bfloat16).contiguous(), vh[:k].to(torch.bfloat16).contiguous(), kept


def _lowrank_svd_pair(b: Any, a: Any, scale: float, rank: int) -> tuple[Any, Any, float]:
    """``_svd_pair(scale * b @ a, rank)`` without forming the product: QR of both factors and the SVD
    of an r x r core (exact, and fast where a full SVD of every update is not)."""
    import torch

    qb, rb = torch.linalg.qr(b)  # out x r, r x r
    qa, ra = torch.linalg.qr(a.T)  # in x r, r x r
    u, s, vh = torch.linalg.svd(scale * rb @ ra.T)
    k = min(rank, s.numel())
    kept = float((s[:k] ** 2).sum() / (s**2).sum().clamp_min(1e-30))
    left = (qb @ u[:, :k]) * s[:k]
    right = vh[:k] @ qa.T
    return left.to(torch.bfloat16).contiguous(), right.to(torch.bfloat16).contiguous(), kept


def compress_model(
    model_dir: str | Path, out_dir: str | Path, *, base: str | Path, rank: int = 8, base_model: str = "local:smollm2"
) -> dict[str, Any]:
    """Write the rank-``rank`` bf16 update that turns ``base`` into the checkpoint ``model_dir``.

    Every matrix that differs from the base becomes a low-rank pair; a differing tensor that is not a
    matrix (a norm, a bias) cannot, and is an error naming it.
    """
    from safetensors.torch import save_file

    from train_judge.merge.sources import Checkpoint

    if rank < 1:
        raise ConfigError(f"rank must be >= 1, got {rank}")
    model, ref = Checkpoint(model_dir), Checkpoint(base)
    try:
        missing = sorted(set(model.infos) - set(ref.infos))
        if missing:
            raise ConfigError(
                f"{model_dir} has tensors the base {base} lacks: {missing[:5]}; pass the model's own base with --base"
            )
        out: dict[str, Any] = {}
        kept: list[float] = []
        not_matrix: list[str] = []
        for name in sorted(model.infos):
            a, b = model.read(name).float(), ref.read(name).float()
            if a.shape != b.shape:
                raise ConfigError(f"{name}: shape {tuple(a.shape)} in {model_dir} but {tuple(b.shape)} in {base}")
            delta = a - b
            if not bool(delta.any()):
                continue
            if delta.dim() != 2:
                not_matrix.append(name)
                continue
            out[name + ".lora_B"], out[name + ".lora_A"], share = _svd_pair(delta, rank)
            kept.append(share)
    finally:
        model.close()
        ref.close()
    if not_matrix:
        raise ConfigError(
            f"{model_dir} changes tensors that are not matrices ({', '.join(not_matrix[:5])}); a "
            "low-rank update cannot carry them: ship a LoRA adapter or a checkpoint that changes "
            "matrices only"
        )
    if not out:
        raise ConfigError(f"{model_dir} equals its base {base}: nothing to ship")
    dst = Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / ADAPTER_FILE))
    meta = {
        "base_model": base_model,
        "rank": rank,
        "source": "checkpoint",
        "modules": len(kept),
        "min_energy_kept": round(min(kept), 4),
        "mean_energy_kept": round(sum(kept) / len(kept), 4),
    }
    (dst / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def ship(
    source: str | Path,
    out_dir: str | Path,
    *,
    rank: int = 8,
    base: str | Path | None = None,
    base_model: str = "local:smollm2",
) -> dict[str, Any]:
    """``compress_adapter`` for a peft adapter folder, else ``compress_model`` against ``base``."""
    if (Path(source) / "adapter_config.json").is_file():
        return compress_adapter(source, out_dir, rank=rank, base_model=base_model)
    if base is None:
        from prom_reward.core.presets import resolve_model_path

        base = resolve_model_path(base_model)
    return compress_model(source, out_dir, base=base, rank=rank, base_model=base_model)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m train_judge.ship", description=__doc__.split("\n\n")[0])
    ap.add_argument("adapter", help="peft LoRA adapter folder, or a full (merged) checkpoint folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--base-model", default="local:smollm2", help="the base the update applies to (recorded)")
    ap.add_argument("--base", default=None, help="for a checkpoint: the base folder (default: --base-model's)")
    args = ap.parse_args(argv)
    try:
        print(json.dumps(ship(args.adapter, args.out, rank=args.rank, base=args.base, base_model=args.base_model)))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
