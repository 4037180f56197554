"""Helpers for the train_judge.merge tests: tiny safetensors checkpoints written with safetensors itself."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

BASE = {"w": [[1.0, 2.0], [3.0, 4.0]], "n": [1.0, 1.0]}
M1 = {"w": [[5.0, 1.0], [3.5, 1.0]], "n": [2.0, 0.0]}  # task vector d1 = [[4, -1], [0.5, -3]], [1, -1]
M2 = {"w": [[-1.0, 4.5], [-2.0, 5.0]], "n": [1.0, 3.0]}  # task vector d2 = [[-2, 2.5], [-5, 1]], [0, 2]
POS = [0, 1, 2]  # an int64 buffer: copied from the reference model, never merged


def save_model(
    folder: Path, values: dict, dtype: torch.dtype = torch.float32, shards: int = 1, extra: dict | None = None
) -> Path:
    """Write a tiny model folder (config.json, tokenizer_config.json, 1 or 2 safetensors shards)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: torch.tensor(v, dtype=dtype) for k, v in values.items()}
    tensors["pos"] = torch.tensor(POS, dtype=torch.int64)
    tensors.update(extra or {})
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i in range(shards):
            part = {n: tensors[n] for n in names[i::shards]}
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            save_file(part, str(folder / fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({"model_type": "tiny", "torch_dtype": str(dtype)[6:]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"note": folder.name}))
    return folder


def load_output(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a merged folder (single file or index + shards)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        out: dict[str, torch.Tensor] = {}
        for f in sorted(set(json.loads(index.read_text())["weight_map"].values())):
            out.update(load_file(str(folder / f)))
        return out
    return load_file(str(folder / "model.safetensors"))
