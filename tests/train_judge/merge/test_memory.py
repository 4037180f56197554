"""Peak memory of a streaming merge stays bounded far below the size of the models (train_judge.merge).

Three float32 checkpoints of ~268 MB each (64 tensors of 4 MiB, each split over two shards) are
written by one subprocess; a second subprocess merges them with TIES (the method with the most
temporaries) and reports its peak RSS (VmHWM, reset after the imports via ``/proc/self/clear_refs``,
so an import-time peak cannot hide the merge's) over its RSS before the merge (numba's kernels, a
fixed ~60 MB of compiled code and LLVM, are loaded before that reset: ``kernels.warm_up``). The increase must
stay under 64 MB: a quarter of one input model, a twelfth of all three.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TENSORS, NUMEL = 64, 1 << 20  # 64 x 4 MiB float32 per model
BOUND_MB = 64

MAKE = r"""
import json, sys, torch
from pathlib import Path
from train_judge.merge.safetensors_io import ShardWriter, TensorInfo
root, tensors, numel = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for m in range(3):
    folder = root / f"m{m}"
    folder.mkdir(parents=True)
    names = [f"layers.{i}.weight" for i in range(tensors)]
    halves = [names[: tensors // 2], names[tensors // 2:]]
    weight_map = {}
    for s, part in enumerate(halves):
        fname = f"model-{s + 1:05d}-of-00002.safetensors"
        g = torch.Generator().manual_seed(m)
        with ShardWriter(folder / fname, [TensorInfo(n, "F32", (numel // 1024, 1024)) for n in part]) as w:
            for n in part:
                w.write(n, torch.randn(numel // 1024, 1024, generator=g))
        weight_map.update({n: fname for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text("{}")
"""

MERGE = r"""
import json, sys
from train_judge.merge import MergeConfig, ModelEntry, run_merge
root = sys.argv[1]
cfg = MergeConfig(method="ties", base_model=f"{root}/m0", models=(ModelEntry(f"{root}/m1"), ModelEntry(f"{root}/m2")),
                  parameters={"density": 0.5}, output=f"{root}/out", max_shard_size="100MB")
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
from train_judge.merge import kernels
kernels.warm_up()  # numba's runtime and the compiled kernels (~60 MB, fixed) count with the imports
open("/proc/self/clear_refs", "w").write("5")  # reset the peak to now: an import-time peak must not hide the merge's
before = status("VmRSS:")
report = run_merge(cfg)
after = status("VmHWM:")
print(json.dumps({"before_kb": before, "after_kb": after, "shards": report.shards, "bytes": report.total_bytes,
                  "seconds": report.seconds}))
"""


def _run(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.integration  # merges ~800 MB of checkpoints in a subprocess
def test_peak_rss_stays_bounded(tmp_path):
    _run(MAKE, str(tmp_path), str(TENSORS), str(NUMEL))
    model_bytes = sum(f.stat().st_size for f in (tmp_path / "m1").glob("*.safetensors"))
    assert model_bytes > 4 * BOUND_MB * 1e6  # each input is several times the bound
    result = json.loads(_run(MERGE, str(tmp_path)).strip().splitlines()[-1])
    extra_mb = (result["after_kb"] - result["before_kb"]) / 1024
    print(
        f"peak RSS {result['after_kb'] / 1024:.0f} MB, +{extra_mb:.1f} MB over the imports, "
        f"merging 3 x {model_bytes / 1e6:.0f} MB in {result['seconds']:.1f} s"
    )
    assert result["bytes"] == TENSORS * NUMEL * 4 and result["shards"] == 3
    assert extra_mb < BOUND_MB
    # spot-check the result: TIES of identical-seed tensors is deterministic; the output reads back
    from safetensors import safe_open

    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert len(index["weight_map"]) == TENSORS
    first = index["weight_map"]["layers.0.weight"]
    with safe_open(str(tmp_path / "out" / first), "pt") as f:
        assert f.get_slice("layers.0.weight").get_shape() == [NUMEL // 1024, 1024]
