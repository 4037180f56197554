"""Bit-identity of merge outputs between two versions of ``train_judge.merge``.

Generates inputs under a scratch folder (bf16 Llama-shaped models of ``--size-gb`` each, smaller
float32 and float16 models with odd shapes, two PEFT LoRA experts), then merges each configuration
below with the code under ``--before`` (an older checkout, e.g. ``/work/main``, or one unpacked with
``cp -r train_judge prom_reward /tmp/merge_before/``) and with this checkout, each in a fresh process,
and compares the sha256 of the output tensor files. The configurations cover every method, weights,
lambda, densities, normalize, t_by_name, bf16 / float16 / float32 inputs and outputs, mixed input
dtypes, LoRA experts, and the four shipped merge configs (``train_judge/configs/*merge*.yaml``: the
same method, parameters, seed and output dtype, on the generated models). Prints one line per
configuration and exits 1 on any difference.

    flock /tmp/prom_heavy.lock env PYTHONPATH=$PWD .venv/bin/python benchmarks/merge_identity.py \
        --before /work/main --size-gb 0.3

Example (the configurations are plain data):
    >>> sorted(CONFIGS)[:2]
    ['dare_linear_bf16', 'dare_linear_drop_f16out']
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

B, F32, F16 = ("base", "m1", "m2"), ("b32", "f32a", "f32b"), ("b16", "f16a", "f16b")
CONFIGS: dict[str, dict] = {  # name -> (method, inputs (base or None, models), parameters, extra keys)
    "linear_bf16": {"method": "linear", "models": B[1:], "parameters": {"weights": [0.5, 0.5]}},
    "linear_unnorm_f32out": {
        "method": "linear",
        "models": B[1:],
        "dtype": "float32",
        "parameters": {"weights": [0.3, 0.9], "normalize": False},
    },
    "task_arithmetic_bf16": {"method": "task_arithmetic", "base": B[0], "models": B[1:], "parameters": {}},
    "task_arithmetic_neg_lambda": {
        "method": "task_arithmetic",
        "base": B[0],
        "models": B[1:],
        "parameters": {"weights": [0.7, -0.4], "lambda": 1.3},
    },
    "ties_bf16": {"method": "ties", "base": B[0], "models": B[1:], "parameters": {"density": 0.2}},
    "ties_mixed_f32out": {
        "method": "ties",
        "base": B[0],
        "models": B[1:],
        "dtype": "float32",
        "densities": [0.5, 0.3],
        "parameters": {"weights": [1.0, 2.0], "normalize": False, "lambda": 0.8},
    },
    "dare_ties_bf16": {"method": "dare_ties", "base": B[0], "models": B[1:], "parameters": {"density": 0.9}},
    "dare_ties_sum_seed3": {
        "method": "dare_ties",
        "base": B[0],
        "models": B[1:],
        "seed": 3,
        "parameters": {"density": 0.5, "normalize": False},
    },
    "dare_linear_bf16": {"method": "dare_linear", "base": B[0], "models": B[1:], "parameters": {"density": 0.9}},
    "dare_linear_drop_f16out": {
        "method": "dare_linear",
        "base": B[0],
        "models": B[1:],
        "seed": 7,
        "dtype": "float16",
        "parameters": {"drop_rate": 0.3, "weights": [0.6, 0.4], "lambda": 1.95},
    },
    "slerp_bf16": {"method": "slerp", "models": B[1:], "parameters": {"t": 0.5}},
    "slerp_t_by_name_f32out": {
        "method": "slerp",
        "models": B[1:],
        "dtype": "float32",
        "parameters": {"t": 0.3, "t_by_name": {"*.mlp.*": 0.8}},
    },
    "slerp_f32": {"method": "slerp", "models": F32[1:], "parameters": {"t": 0.7}},
    "slerp_f16_bf16out": {"method": "slerp", "models": F16[1:], "dtype": "bfloat16", "parameters": {"t": 0.4}},
    "ties_f32": {"method": "ties", "base": F32[0], "models": F32[1:], "parameters": {"density": 0.3}},
    "task_arithmetic_f32": {
        "method": "task_arithmetic",
        "base": F32[0],
        "models": F32[1:],
        "parameters": {"weights": [0.25, 1.5]},
    },
    "dare_linear_f32_bf16out": {
        "method": "dare_linear",
        "base": F32[0],
        "models": F32[1:],
        "dtype": "bfloat16",
        "parameters": {"density": 0.7},
    },
    "linear_f32": {"method": "linear", "models": F32[1:], "parameters": {"weights": [2.0, 1.0]}},
    "dare_ties_f16": {"method": "dare_ties", "base": F16[0], "models": F16[1:], "parameters": {"density": 0.6}},
    "ties_f16": {"method": "ties", "base": F16[0], "models": F16[1:], "parameters": {"density": 0.5}},
    "task_arithmetic_f16": {
        "method": "task_arithmetic",
        "base": F16[0],
        "models": F16[1:],
        "parameters": {"lambda": 0.5},
    },
    "dare_linear_lora_pocket": {
        "method": "dare_linear",
        "base": B[0],
        "models": ("lora1", "lora2"),
        "parameters": {"density": 0.7, "weights": [0.5, 0.5]},
    },
    "ties_lora_and_full": {"method": "ties", "base": B[0], "models": ("m1", "lora1"), "parameters": {"density": 0.4}},
    "linear_lora_unnorm": {
        "method": "linear",
        "base": B[0],
        "models": ("lora1", "lora2"),
        "parameters": {"weights": [0.7, 0.6], "normalize": False},
    },
    "slerp_lora_and_full": {"method": "slerp", "base": B[0], "models": ("m1", "lora2"), "parameters": {"t": 0.4}},
    "task_arithmetic_mixed_dtypes": {
        "method": "task_arithmetic",
        "base": F32[0],
        "models": (F16[1], F32[2]),
        "parameters": {"weights": [0.5, 1.5]},
    },
    "ties_mixed_dtypes_bf16out": {
        "method": "ties",
        "base": F16[0],
        "models": (F32[1], F16[2]),
        "dtype": "bfloat16",
        "parameters": {"density": 0.4},
    },
    # the shipped configs (train_judge/configs/*merge*.yaml), on the generated models
    "shipped_pocket_merge_dare_linear": {
        "method": "dare_linear",
        "base": B[0],
        "models": ("lora1", "lora2"),
        "dtype": "float32",
        "parameters": {"density": 0.7, "weights": [0.5, 0.5]},
    },
    "shipped_pocket_merge_linear": {
        "method": "linear",
        "base": B[0],
        "models": ("lora1", "lora2"),
        "dtype": "float32",
        "parameters": {"weights": [0.5, 0.5]},
    },
    "shipped_prometheus2_7b_merge_linear": {
        "method": "linear",
        "models": B[1:],
        "dtype": "bfloat16",
        "parameters": {"weights": [0.5, 0.5], "normalize": True},
    },
    "shipped_prometheus2_8x7b_merge_dare": {
        "method": "dare_linear",
        "base": B[0],
        "models": B[1:],
        "dtype": "bfloat16",
        "parameters": {"drop_rate": 0.1, "lambda": 1.95, "weights": [0.5, 0.5]},
    },
}

RUN = r"""
import json, sys
from train_judge.merge import MergeConfig, ModelEntry, run_merge
c = json.loads(sys.argv[1])
dens = c.get("densities") or [None] * len(c["models"])
models = tuple(ModelEntry(p, density=d) for p, d in zip(c["models"], dens))
run_merge(MergeConfig(method=c["method"], base_model=c.get("base"), models=models, parameters=c["parameters"],
                      output=c["output"], seed=c.get("seed", 0), dtype=c.get("dtype"), max_shard_size="200MB"))
"""


def _write(folder: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))


def make_inputs(root: Path, size_gb: float) -> None:
    """bf16 Llama-shaped base + 2 (via merge_speed), float32 / float16 odd-shaped sets, 2 LoRA experts."""
    import torch

    from benchmarks.merge_speed import make_models

    make_models(root, size_gb, 100 * 10**6)
    g = torch.Generator().manual_seed(1)
    shapes = {
        "a.weight": (1000, 333),
        "b.weight": (2047,),
        "c.weight": (3, 1 << 20),
        "d.weight": (5000, 517),
        "e.weight": (7, 13, 5),
        "idx": (10,),
    }
    for names, dtype in ((F32, torch.float32), (F16, torch.float16)):
        base = {k: (torch.randn(s, generator=g) * 0.02).to(dtype) for k, s in shapes.items() if k != "idx"}
        base["e.weight"][0, 0, :3] = torch.tensor([0.0, -0.0, 1e-40 if dtype == torch.float32 else 0.0])
        base["idx"] = torch.arange(10)
        _write(root / names[0], base)
        for i, m in enumerate(names[1:]):
            t = {
                k: (v.float() + torch.randn(v.shape, generator=g) * 2e-3 * (i + 1)).to(dtype)
                for k, v in base.items()
                if k != "idx"
            }
            t["b.weight"][:100] = base["b.weight"][:100]  # zero deltas
            t["idx"] = base["idx"]
            _write(root / m, t)
    from safetensors import safe_open

    layer_names = []
    for shard in sorted((root / "base").glob("*.safetensors")):
        with safe_open(str(shard), "pt") as f:
            layer_names += sorted(k for k in f.keys() if "layers.0." in k and "proj" in k)
    from benchmarks.merge_speed import llama_shapes

    sh = dict(llama_shapes(1))
    for i, name in enumerate(("lora1", "lora2")):
        folder = root / name
        folder.mkdir(exist_ok=True)
        t = {}
        for k in layer_names[: 4 + i]:
            out_f, in_f = sh[k]
            t[f"base_model.model.{k[: -len('.weight')]}.lora_A.weight"] = torch.randn(8, in_f, generator=g) * 0.01
            t[f"base_model.model.{k[: -len('.weight')]}.lora_B.weight"] = torch.randn(out_f, 8, generator=g) * 0.01
        from safetensors.torch import save_file

        save_file(t, str(folder / "adapter_model.safetensors"))
        (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "lora_alpha": 16}))


def digest(folder: Path) -> str:
    """sha256 over the output's tensor files (and index), in name order."""
    h = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.index.json")):
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 24):
                h.update(chunk)
    return h.hexdigest()


def merge(root: Path, name: str, pythonpath: str) -> tuple[str, float]:
    """Run configuration ``name`` in a fresh process; (digest, seconds)."""
    c = dict(CONFIGS[name])
    c["base"] = str(root / c["base"]) if c.get("base") else None
    c["models"] = [str(root / m) for m in c["models"]]
    out = root / f"out-{name}"
    c["output"] = str(out)
    env = dict(os.environ, PYTHONPATH=pythonpath)
    env.pop("PROM_MERGE_KERNELS", None)
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(c)], env=env, cwd=root, capture_output=True, text=True)
    secs = time.monotonic() - t
    if proc.returncode:
        raise SystemExit(f"{name} ({pythonpath}) failed:\n{proc.stderr[-3000:]}")
    d = digest(out)
    shutil.rmtree(out)
    return d, secs


def main(argv: list[str] | None = None) -> int:
    """Generate, merge every configuration with each version, compare, clean up."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="folder holding the older train_judge (and prom_reward)")
    ap.add_argument("--size-gb", type=float, default=0.3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="merge_identity_"))
    bad = 0
    try:
        if not (root / "lora2").is_dir():
            make_inputs(root, args.size_gb)
        for name in args.configs.split(","):
            ref, t0 = merge(root, name, f"{args.before}:{REPO}")
            d, t1 = merge(root, name, str(REPO))
            bad += d != ref
            same = "identical" if d == ref else "DIFFERENT"
            print(f"{name:<36} before {t0:5.1f}s  this {t1:5.1f}s  {same}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print("all identical" if not bad else f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
