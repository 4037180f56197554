"""Merge speed against the I/O floor, and peak memory, on generated Llama-shaped checkpoints.

Writes a base and two fine-tuned models (bf16, Llama-shaped: embeddings, per-layer attention and MLP
projections, norms, lm_head; several shards each), then, in the same run:

- the I/O floor: a plain process reads every input byte (base + models, positioned reads into one
  reused buffer) and writes the output's bytes; the best of three tries;
- each method in a fresh subprocess (``python -m train_judge.merge``-equivalent ``run_merge``),
  timing the merge and its peak RSS above the post-import RSS (the peak, VmHWM, is reset after the
  imports through ``/proc/self/clear_refs``, so an import-time peak does not hide the merge's); with
  the numba kernels, their loading (numba's cache, or compiling on a first run: ``kernels.warm_up``)
  is done before the clock starts and reported apart (``kernel load s``); ``--pythonpath`` runs the
  merges with another checkout's ``train_judge`` (before / after figures on the same inputs);
- with ``--mergekit PYTHONPATH``, each method also by mergekit (when it imports there), the same way
  (TIES / DARE-TIES with ``normalize: true``, our default; SLERP with m1 as its base).

It prints, per method, seconds, the ratio to the floor, and the peak RSS increase in units of the
largest tensor (stored dtype). Each measurement starts after ``os.sync()`` (no earlier output's
writeback inside it) and a read of every input (a warm page cache). ``--repeat N`` measures the floor
and every method N times, interleaved, and
ends with each row's median ratio to its own round's floor, the range, and the best-of-rounds ratio
(the row's fastest run over the fastest floor of the same inputs): on the 2-core development VM a
1 GB write to the ext4 scratch folder took either about 0.2 s or about 2.2 s, by timing alone
(to tmpfs a steady 0.4 s), so one round's floor or merge can be several times off, either way.
``--out-dir`` puts the outputs and the floor's written file elsewhere (e.g. ``/dev/shm``), inputs
staying in ``--dir``. Generated files are deleted at the end (``--keep`` to keep them).

    flock /tmp/prom_heavy.lock env PYTHONPATH=$PWD .venv/bin/python benchmarks/merge_speed.py --size-gb 1

Example (the shapes for a given size):
    >>> [n for n, _ in llama_shapes(2)][:3]
    ['lm_head.weight', 'model.embed_tokens.weight', 'model.layers.0.input_layernorm.weight']
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HIDDEN, INTER, VOCAB = 2048, 5632, 32000
METHODS = {  # row -> (method, parameters)
    "linear": ("linear", {"weights": [0.5, 0.5]}),
    "task_arithmetic": ("task_arithmetic", {"lambda": 1.0}),
    "ties": ("ties", {"density": 0.2}),
    "dare_ties": ("dare_ties", {"density": 0.9}),
    "dare_linear": ("dare_linear", {"density": 0.9}),
    "slerp": ("slerp", {"t": 0.5}),
}


def llama_shapes(layers: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of a Llama-style model with ``layers`` layers, in safetensors' (sorted) order."""
    out = [
        ("model.embed_tokens.weight", (VOCAB, HIDDEN)),
        ("model.norm.weight", (HIDDEN,)),
        ("lm_head.weight", (VOCAB, HIDDEN)),
    ]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (HIDDEN,)), (p + "post_attention_layernorm.weight", (HIDDEN,))]
        out += [(p + f"self_attn.{m}_proj.weight", (HIDDEN, HIDDEN)) for m in "qkvo"]
        out += [
            (p + "mlp.gate_proj.weight", (INTER, HIDDEN)),
            (p + "mlp.up_proj.weight", (INTER, HIDDEN)),
            (p + "mlp.down_proj.weight", (HIDDEN, INTER)),
        ]
    return sorted(out)


def llama_config(layers: int) -> dict:
    """A Llama ``config.json`` for the generated shapes (mergekit reads the architecture from it)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "vocab_size": VOCAB,
        "num_hidden_layers": layers,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
    }


def make_models(root: Path, size_gb: float, shard_bytes: int) -> tuple[list[Path], int]:
    """Base + two models of about ``size_gb`` each; returns their folders and the largest tensor's bytes."""
    import torch

    from train_judge.merge.plan import layout_shards, shard_names
    from train_judge.merge.safetensors_io import ShardWriter, TensorInfo

    per_layer = 2 * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * INTER)
    layers = max(1, round((size_gb * 1e9 - 4 * VOCAB * HIDDEN) / per_layer))
    shapes = llama_shapes(layers)
    infos = [TensorInfo(n, "BF16", s) for n, s in shapes]
    shards = layout_shards(infos, shard_bytes)
    names = shard_names(len(shards))
    folders = []
    g = torch.Generator().manual_seed(0)
    base = {}
    if all((root / m / "config.json").is_file() for m in ("base", "m1", "m2")):  # --keep'd from an earlier run
        for m in ("base", "m1", "m2"):  # (older runs wrote a config without the architecture)
            (root / m / "config.json").write_text(json.dumps(llama_config(layers)))
        return [root / m for m in ("base", "m1", "m2")], max(i.nbytes for i in infos)
    for m in ("base", "m1", "m2"):
        folder = root / m
        folder.mkdir(parents=True)
        for fname, shard in zip(names, shards, strict=True):
            with ShardWriter(folder / fname, shard) as w:
                for info in shard:
                    if m == "base":
                        t = (torch.randn(info.shape, generator=g) * 0.02).bfloat16()
                        base[info.name] = t
                    else:  # a fine-tune: the base plus a small delta
                        t = (base[info.name].float() + torch.randn(info.shape, generator=g) * 2e-3).bfloat16()
                    w.write(info.name, t)
        if len(names) > 1:
            weight_map = {i.name: f for f, shard in zip(names, shards, strict=True) for i in shard}
            (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
        (folder / "config.json").write_text(json.dumps(llama_config(layers)))
        folders.append(folder)
    base.clear()
    return folders, max(i.nbytes for i in infos)


def read_all(inputs: list[Path], view: memoryview) -> None:
    """Read every byte of the inputs' safetensors files into ``view`` (a buffer, overwritten)."""
    for folder in inputs:
        for f in sorted(folder.glob("*.safetensors")):
            with open(f, "rb", buffering=0) as fh:
                while fh.readinto(view):
                    pass


def settle(inputs: list[Path]) -> None:
    """Before a measurement: earlier outputs written back (``os.sync``) and the inputs read once, so
    every measurement starts from a warm page cache (this VM's reclaim drops pages idle for a minute)."""
    os.sync()
    read_all(inputs, memoryview(bytearray(16 << 20)))


def io_floor(inputs: list[Path], out_bytes: int, scratch: Path) -> float:
    """Seconds to read every input byte (positioned reads into one buffer) and write ``out_bytes``."""
    buf = bytearray(64 << 20)
    view = memoryview(buf)
    settle(inputs)
    start = time.monotonic()
    read_all(inputs, view)
    with open(scratch, "wb") as fh:
        left = out_bytes
        while left > 0:
            n = min(left, len(buf))
            fh.write(view[:n])
            left -= n
    elapsed = time.monotonic() - start
    scratch.unlink()
    return elapsed


MERGE = r"""
import json, resource, sys, time
from train_judge.merge import MergeConfig, ModelEntry, run_merge
root, method, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
threads, out = int(sys.argv[4]), sys.argv[5]
import time
import torch
try:  # the numba kernels: compiled or loaded from numba's cache before the clock starts (reported apart)
    from train_judge.merge import kernels
    path, load = "numba", kernels.warm_up()
except ImportError:  # an older checkout without kernels
    path, load = "torch (no kernels module)", 0.0
if threads:
    torch.set_num_threads(threads)
base = None if method in ("linear", "slerp") else f"{root}/base"
cfg = MergeConfig(method=method, base_model=base, models=(ModelEntry(f"{root}/m1"), ModelEntry(f"{root}/m2")),
                  parameters=params, output=f"{out}/out-{method}", max_shard_size="500MB")
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS: imports excluded
before = status("VmRSS:")
t = time.monotonic()
run_merge(cfg)
secs = time.monotonic() - t
print(json.dumps({"seconds": secs, "extra_bytes": status("VmHWM:") - before, "path": path, "load": load}))
"""


MERGEKIT = r"""
import json, shutil, sys, time
from mergekit.config import MergeConfiguration
from mergekit.merge import MergeOptions, run_merge
root, method, params, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
weights = params.pop("weights", [1.0, 1.0])
density = {"density": params["density"]} if "density" in params else {}
models = [{"model": f"{root}/{m}", "parameters": {"weight": w, **density}} for m, w in zip(("m1", "m2"), weights)]
cfg = {"merge_method": method, "models": models, "dtype": "bfloat16"}
if method == "slerp":  # mergekit's slerp: the base model is the t = 0 end
    cfg.update(base_model=f"{root}/m1", models=[{"model": f"{root}/m1"}, {"model": f"{root}/m2"}],
               parameters={"t": params["t"]})
elif method != "linear":
    cfg["base_model"] = f"{root}/base"
    cfg["parameters"] = {"normalize": True} if method in ("ties", "dare_ties") else {}
    if "lambda" in params:
        cfg["parameters"]["lambda"] = params["lambda"]
conf = MergeConfiguration.model_validate(cfg)
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS:")
t = time.monotonic()
run_merge(conf, f"{out}/out-mergekit", MergeOptions(copy_tokenizer=False, lazy_unpickle=True, write_model_card=False,
                                                     quiet=True))
secs = time.monotonic() - t
shutil.rmtree(f"{out}/out-mergekit")
print(json.dumps({"seconds": secs, "extra_bytes": status("VmHWM:") - before, "path": "mergekit", "load": 0.0}))
"""


def mergekit_imports(pythonpath: str) -> bool:
    """Whether mergekit imports with ``pythonpath``."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return subprocess.run([sys.executable, "-c", "import mergekit.merge"], env=env, capture_output=True).returncode == 0


def run_mergekit(root: Path, row: str, pythonpath: str, out: Path | None = None) -> dict:
    """Row ``row``'s merge by mergekit (importable with ``pythonpath``) in a fresh process; its seconds and
    peak RSS increase, as ``run_method``."""
    method, params = METHODS[row]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    settle([root / m for m in ("base", "m1", "m2")])
    proc = subprocess.run(
        [sys.executable, "-c", MERGEKIT, str(root), method, json.dumps(params), str(out or root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    if proc.returncode:
        raise SystemExit(f"mergekit {row} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_method(root: Path, row: str, threads: int, pythonpath: str | None = None, out: Path | None = None) -> dict:
    """Merge benchmark row ``row`` in a fresh process (with ``pythonpath``'s ``train_judge`` when given), its
    output in ``out`` (default ``root``): its seconds, peak RSS increase, kernel path and kernel load seconds."""
    method, params = METHODS[row]
    env = dict(os.environ, PYTHONPATH=pythonpath or str(REPO))
    env.pop("PROM_MERGE_KERNELS", None)
    settle([root / m for m in ("base", "m1", "m2")])
    proc = subprocess.run(
        [sys.executable, "-c", MERGE, str(root), method, json.dumps(params), str(threads), str(out or root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )  # cwd: no repo shadowing PYTHONPATH
    if proc.returncode:
        raise SystemExit(f"{row} failed:\n{proc.stderr[-3000:]}")
    shutil.rmtree((out or root) / f"out-{method}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


HEADER = (
    f"{'method':<20} {'kernels':<8} {'seconds':>8} {'x floor':>8} {'peak RSS +MB':>13} {'x largest':>10} "
    f"{'kernel load s':>14}"
)


def report(row: str, r: dict, floor: float, largest: int) -> None:
    """One table row: seconds, x floor, peak RSS increase (MB, x largest tensor), kernel load seconds."""
    print(
        f"{row:<20} {r['path'].split()[0]:<8} {r['seconds']:>8.2f} {r['seconds'] / floor:>8.2f} "
        f"{r['extra_bytes'] / 1e6:>13.0f} {r['extra_bytes'] / largest:>10.2f} {r['load']:>14.2f}",
        flush=True,
    )


def summary(results: dict[tuple[str, str], list[tuple[dict, float]]], largest: int) -> None:
    """Per row over the rounds: the median ratio to each round's own floor, its range, median seconds,
    the best-of-rounds ratio (fastest run over the fastest floor of the same inputs) and the largest
    peak RSS increase."""
    print(
        f"-- over {len(next(iter(results.values())))} rounds (median and range: each ratio against its own round's "
        "floor; best: fastest run / fastest floor)"
    )
    print(
        f"{'method':<20} {'kernels':<8} {'median s':>9} {'median x floor':>15} {'range x floor':>15} "
        f"{'best x floor':>13} {'max x largest':>14}"
    )
    for (row, _), runs in results.items():
        ratios = [r["seconds"] / floor for r, floor in runs]
        best = min(r["seconds"] for r, _ in runs) / min(floor for _, floor in runs)
        print(
            f"{row:<20} {runs[0][0]['path'].split()[0]:<8} {statistics.median(r['seconds'] for r, _ in runs):>9.2f} "
            f"{statistics.median(ratios):>15.2f} {f'{min(ratios):.2f}-{max(ratios):.2f}':>15} {best:>13.2f} "
            f"{max(r['extra_bytes'] for r, _ in runs) / largest:>14.2f}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    """Generate, measure the floor and every method, print the table, clean up."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gb", type=float, default=1.0, help="size of each generated model (default 1.0)")
    ap.add_argument("--shard-mb", type=int, default=300, help="input shard size in MB (default 300)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--threads", type=int, default=0, help="torch threads in the merge (0: torch's default)")
    ap.add_argument(
        "--dir",
        default=None,
        help="scratch folder (default: a new one under /tmp); models already there (from --keep) are reused",
    )
    ap.add_argument(
        "--pythonpath",
        default=None,
        help="PYTHONPATH of the merge processes (e.g. an older checkout, for before/after figures)",
    )
    ap.add_argument(
        "--out-dir",
        default=None,
        help="folder for the merge outputs and the floor's written file "
        "(default: --dir; e.g. /dev/shm to take the disk's write stalls out of both)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoints")
    ap.add_argument(
        "--mergekit",
        default=None,
        metavar="PYTHONPATH",
        help="also run each method with mergekit, importable with this PYTHONPATH (e.g. a folder "
        "from `pip install --no-deps --target DIR mergekit==0.1.5 immutables`), when it imports",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of floor + every method, interleaved; with "
        "more than one, a summary of the median ratios follows (a noisy machine)",
    )
    args = ap.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="merge_bench_"))
    out = Path(args.out_dir) if args.out_dir else root
    out.mkdir(parents=True, exist_ok=True)
    try:
        t = time.monotonic()
        folders, largest = make_models(root, args.size_gb, args.shard_mb * 10**6)
        model_bytes = sum(f.stat().st_size for f in folders[1].glob("*.safetensors"))
        print(
            f"generated 3 models of {model_bytes / 1e9:.2f} GB (bf16, {len(list(folders[1].glob('*.safetensors')))} "
            f"shards each, largest tensor {largest / 1e6:.0f} MB) in {time.monotonic() - t:.0f} s"
        )
        mergekit = args.mergekit if args.mergekit and mergekit_imports(args.mergekit) else None
        if args.mergekit and mergekit is None:
            print(f"mergekit does not import with PYTHONPATH={args.mergekit}: no mergekit rows")
        results: dict[tuple[str, str], list[tuple[dict, float]]] = {}
        for rnd in range(args.repeat):
            if args.repeat > 1:
                print(f"-- round {rnd + 1} of {args.repeat}")
            floors = {}
            for n_inputs in (2, 3):  # linear/slerp read 2 models, task-vector methods base + 2
                inputs = folders[1:] if n_inputs == 2 else folders
                floors[n_inputs] = min(io_floor(inputs, model_bytes, out / "floor.bin") for _ in range(3))
                print(f"I/O floor, {n_inputs} inputs + 1 output: {floors[n_inputs]:.2f} s")
            print(HEADER)
            for row in args.methods.split(","):
                floor = floors[2 if row in ("linear", "slerp") else 3]
                runs = [("ours", lambda row=row: run_method(root, row, args.threads, args.pythonpath, out))]
                if mergekit:
                    runs.append(("mergekit", lambda row=row: run_mergekit(root, row, mergekit, out)))
                for who, run in runs:
                    r = run()
                    report(row, r, floor, largest)
                    results.setdefault((row, who), []).append((r, floor))
        if args.repeat > 1:
            summary(results, largest)
        print(
            f"(cpu count {os.cpu_count()}, torch threads {args.threads or 'default'}; "
            f"this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
