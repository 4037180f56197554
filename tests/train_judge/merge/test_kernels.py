"""The numba kernels (train_judge.merge.kernels / fused) give the torch path's bytes, and DARE's Philox.

Every element-wise method and TIES merges small checkpoints (odd shapes, bf16 deltas full of equal
magnitudes, signed zeros) in chunks of a few rows with ``PROM_MERGE_KERNELS=torch`` and ``=numba``;
the output files must be byte for byte the same, for bf16, float16 and float32 inputs and outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from prom_reward.errors import ConfigError
from train_judge.merge import MergeConfig, ModelEntry, chunking, fused, kernels, philox, run_merge, ties_cuts
from train_judge.merge.trim import keep_count

pytestmark = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba is not installed")

SHAPES = {"a.weight": (37, 29), "b.weight": (1000,), "c.weight": (3, 5, 7), "d.weight": (64, 48)}
CASES = {  # method -> parameters, per-model densities
    "linear": ({"weights": [0.3, 0.9]}, None),
    "linear_sum": ({"weights": [0.3, 0.9], "normalize": False}, None),
    "task_arithmetic": ({"weights": [0.7, -0.4], "lambda": 1.3}, None),
    "ties": ({"density": 0.3, "weights": [1.0, 2.0]}, None),
    "ties_per_model": ({"weights": [1.0, 0.5], "lambda": 0.8, "normalize": False}, [0.5, 0.25]),
    # density 1 keeps everything: no cut-off pass, so nothing is read ahead into the rows buffer of small
    # tensors (a bug once: that buffer was used unfilled)
    "ties_per_model_keep_all": ({"weights": [1.0, 3.0]}, [1.0, 1.0]),
    "ties_per_model_one_kept_whole": ({"weights": [2.0, 1.0]}, [1.0, 0.4]),
    "dare_ties": ({"density": 0.6, "normalize": False}, None),
    "dare_linear": ({"density": 0.7, "lambda": 1.95}, None),
    "slerp": ({"t": 0.3}, None),
    "slerp_t_by_name": ({"t": 0.5, "t_by_name": {"b.*": 0.85, "c.*": 0.0, "d.*": 1.0}}, None),
}


def make_models(root, dtype: torch.dtype) -> list[str]:
    """Base and two models: random deltas, quantized ones (many equal magnitudes: ties at the cut-off)."""
    g = torch.Generator().manual_seed(3)
    base = {k: (torch.randn(s, generator=g) * 0.02).to(dtype) for k, s in SHAPES.items()}
    base["c.weight"].view(-1)[:4] = torch.tensor([0.0, -0.0, -0.0, 0.0])
    out = []
    for m in ("base", "m1", "m2"):
        t = (
            base
            if m == "base"
            else {k: (v.float() + torch.randn(v.shape, generator=g) * 2e-3).to(dtype) for k, v in base.items()}
        )
        if m != "base":
            q = torch.randint(-3, 4, SHAPES["b.weight"], generator=g).float() * 2.0**-7
            t["b.weight"] = (base["b.weight"].float() + q).to(dtype)  # deltas in {0, +-1, +-2, +-3} / 128
            t["c.weight"].view(-1)[:3] = torch.tensor([-0.0, 0.0, -0.0])
        (root / m).mkdir()
        save_file(t, str(root / m / "model.safetensors"))
        out.append(str(root / m))
    return out


def merged_bytes(paths, tmp_path, case, path, out_dtype=None, rng="mt19937", tag="") -> dict[str, bytes]:
    params, dens = CASES[case]
    method = case.split("_sum")[0].split("_per_model")[0].split("_t_by_name")[0]
    base = None if method in ("linear", "slerp") else paths[0]
    models = tuple(ModelEntry(p, density=d) for p, d in zip(paths[1:], dens or [None, None], strict=True))
    out = tmp_path / f"out-{case}-{path}-{out_dtype}-{rng}{tag}"
    import os

    old = os.environ.get(fused.ENV)
    os.environ[fused.ENV] = path
    try:
        run_merge(
            MergeConfig(
                method=method,
                base_model=base,
                models=models,
                parameters=dict(params),
                output=str(out),
                dtype=out_dtype,
                seed=5,
                rng=rng,
            )
        )
    finally:
        os.environ.pop(fused.ENV) if old is None else os.environ.__setitem__(fused.ENV, old)
    return {
        k: v.view(-1).view(torch.uint8).numpy().tobytes() for k, v in load_file(str(out / "model.safetensors")).items()
    }


@pytest.mark.integration  # compiles every numba kernel and merges twice per case
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("case", list(CASES))
def test_numba_path_gives_the_torch_paths_bytes(tmp_path, monkeypatch, case, dtype):
    monkeypatch.setattr(chunking, "CHUNK", 64)  # several chunks per tensor: ties at the cut-off span chunks
    paths = make_models(tmp_path, dtype)
    outs = [None, "float32"] if dtype != torch.bfloat16 else [None, "float32", "float16"]
    for out_dtype in outs:
        assert merged_bytes(paths, tmp_path, case, "numba", out_dtype) == merged_bytes(
            paths, tmp_path, case, "torch", out_dtype
        )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_slerp_numba_bytes_when_colinear_or_zero(tmp_path, monkeypatch, dtype):
    """SLERP's fallbacks (nearly colinear: linear; a zero tensor) and plain arcs, in chunks of 64."""
    monkeypatch.setattr(chunking, "CHUNK", 64)
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(300, 7, generator=g), torch.randn(5, 41, generator=g)
    m1 = {"a.weight": x, "b.weight": y, "c.weight": torch.zeros(9, 9), "d.weight": x[:40]}
    m2 = {
        "a.weight": x * 1.7,
        "b.weight": y + torch.randn(5, 41, generator=g) * 1e-3,
        "c.weight": torch.randn(9, 9, generator=g),
        "d.weight": -x[:40] + torch.randn(40, 7, generator=g),
    }
    paths = []
    for i, m in enumerate((m1, m1, m2)):  # the first is a placeholder base (unused by slerp)
        (tmp_path / f"m{i}").mkdir()
        save_file({k: v.to(dtype).clone() for k, v in m.items()}, str(tmp_path / f"m{i}" / "model.safetensors"))
        paths.append(str(tmp_path / f"m{i}"))
    calls = []
    monkeypatch.setattr(kernels, "slerp_out", lambda *a, f=kernels.slerp_out: calls.append(1) or f(*a))
    for out_dtype in (None, "float32", "bfloat16"):
        assert merged_bytes(paths, tmp_path, "slerp", "numba", out_dtype) == merged_bytes(
            paths, tmp_path, "slerp", "torch", out_dtype
        )
    assert len(calls) == 3 * (34 + 5 + 2 + 5)  # the numba path ran, in chunks of <= 64 elements (whole rows)


def test_ties_keeps_the_exact_count_with_ties_across_chunks(tmp_path, monkeypatch):
    """One model, weight 1: the merged delta is the trimmed delta; 1000 quantized entries, chunks of 64."""
    monkeypatch.setattr(chunking, "CHUNK", 64)
    monkeypatch.setenv(fused.ENV, "numba")
    paths = make_models(tmp_path, torch.bfloat16)
    for density in (0.3, 0.5, 0.77):
        out = tmp_path / f"one-{density}"
        run_merge(
            MergeConfig(
                method="ties",
                base_model=paths[0],
                models=(ModelEntry(paths[1]),),
                parameters={"density": density},
                output=str(out),
            )
        )
        got = load_file(str(out / "model.safetensors"))["b.weight"].float()
        b = load_file(paths[0] + "/model.safetensors")["b.weight"].float()
        d = load_file(paths[1] + "/model.safetensors")["b.weight"].float() - b
        order = np.argsort(-d.abs().numpy(), kind="stable")[: keep_count(density, 1000)]  # ties: lowest index first
        want = torch.zeros(1000)
        want[order] = d[order]
        assert torch.equal(got - b, want) and int((want != 0).sum()) == keep_count(density, 1000)


@pytest.mark.parametrize("case", ["ties", "ties_per_model"])
def test_ties_second_pass_when_the_window_misses(tmp_path, monkeypatch, case):
    """The first pass's window of candidate bins is empty: the cut-offs come from another pass."""
    monkeypatch.setattr(chunking, "CHUNK", 64)
    empty = lambda hist, ks, need, n0, n, whole, cached, width=0.0: (  # noqa: E731
        (np.ones(len(ks), np.int64), np.zeros(len(ks), np.int64), 0)
    )
    monkeypatch.setattr(ties_cuts, "window", empty)
    paths = make_models(tmp_path, torch.bfloat16)
    assert merged_bytes(paths, tmp_path, case, "numba") == merged_bytes(paths, tmp_path, case, "torch")


@pytest.mark.parametrize("case", ["dare_ties", "dare_linear"])
def test_philox_same_bytes_on_both_paths_and_in_any_chunking(tmp_path, monkeypatch, case):
    paths = make_models(tmp_path, torch.bfloat16)
    whole = merged_bytes(paths, tmp_path, case, "numba", rng="philox")
    monkeypatch.setattr(chunking, "CHUNK", 37)
    assert merged_bytes(paths, tmp_path, case, "numba", rng="philox", tag="c") == whole
    assert merged_bytes(paths, tmp_path, case, "torch", rng="philox", tag="c") == whole
    assert merged_bytes(paths, tmp_path, case, "numba", tag="mt") != whole  # another generator, other masks


def test_philox_stream():
    key = philox.philox_key(0, "w", 0)
    ref = philox.philox_uniform(*key, 0, 100_003)
    for start, count in ((0, 100_003), (1, 17), (6, 5), (99_990, 13)):
        got = np.empty(count, np.float32)
        philox.philox_fill(got, key[0], key[1], start)
        assert np.array_equal(got, ref[start : start + count]) and np.array_equal(
            philox.philox_uniform(*key, start, count), ref[start : start + count]
        )
    assert ref.min() >= 0.0 and ref.max() < 1.0
    # keep fraction of density 0.7 within 5 sigma over 1e6 draws; other seeds / names / models differ
    u = philox.philox_uniform(*philox.philox_key(1, "x", 1), 0, 1_000_000)
    assert abs(float((u < np.float32(0.7)).mean()) - 0.7) < 5 * (0.21 / 1e6) ** 0.5
    assert abs(float(u.mean()) - 0.5) < 5 * (1 / 12 / 1e6) ** 0.5
    for other in (philox.philox_key(1, "w", 0), philox.philox_key(0, "v", 0), philox.philox_key(0, "w", 1)):
        assert (philox.philox_uniform(*other, 0, 1000) != ref[:1000]).mean() > 0.99


def test_rng_is_validated():
    with pytest.raises(ConfigError, match="rng: unknown generator 'pcg'; valid names: mt19937, philox"):
        MergeConfig(
            method="dare_linear",
            base_model="b",
            models=(ModelEntry("m"),),
            output="o",
            parameters={"density": 0.5},
            rng="pcg",
        )
    with pytest.raises(ConfigError, match="rng: ties draws no random numbers"):
        MergeConfig(
            method="ties",
            base_model="b",
            models=(ModelEntry("m"),),
            output="o",
            parameters={"density": 0.5},
            rng="philox",
        )
    cfg = MergeConfig(
        method="dare_ties", base_model="b", models=(ModelEntry("m"),), output="o", parameters={"density": 0.5}
    )
    assert "rng" not in cfg.to_dict()  # the default stays out of records and fingerprints


def test_env_var_switch(tmp_path, monkeypatch):
    paths = make_models(tmp_path, torch.bfloat16)
    calls = []
    real = kernels.combine
    monkeypatch.setattr(kernels, "combine", lambda *a: (calls.append(1), real(*a))[1])
    for value, used in (("torch", False), ("numba", True), ("", True)):
        monkeypatch.setenv(fused.ENV, value)
        calls.clear()
        run_merge(
            MergeConfig(
                method="task_arithmetic",
                base_model=paths[0],
                models=(ModelEntry(paths[1]),),
                output=str(tmp_path / f"ta-{value}"),
            )
        )
        assert bool(calls) == used
    monkeypatch.setenv(fused.ENV, "cuda")
    with pytest.raises(ConfigError, match="PROM_MERGE_KERNELS: expected one of numba, torch"):
        run_merge(
            MergeConfig(
                method="linear", models=(ModelEntry(paths[1]), ModelEntry(paths[2])), output=str(tmp_path / "bad")
            )
        )
    monkeypatch.setattr(kernels, "HAVE_NUMBA", False)  # numba missing: the torch path, or a clear error
    monkeypatch.setenv(fused.ENV, "")
    assert fused.path() == "torch"
    monkeypatch.setenv(fused.ENV, "numba")
    with pytest.raises(ConfigError, match="numba is not installed"):
        fused.path()


def test_lora_experts_and_mixed_dtypes_keep_the_torch_path(tmp_path, monkeypatch):
    monkeypatch.setenv(fused.ENV, "numba")
    paths = make_models(tmp_path, torch.bfloat16)
    (tmp_path / "m32").mkdir()
    save_file(
        {k: v.float() for k, v in load_file(paths[1] + "/model.safetensors").items()},
        str(tmp_path / "m32" / "model.safetensors"),
    )
    cfg = MergeConfig(
        method="task_arithmetic",
        base_model=paths[0],
        output=str(tmp_path / "o"),
        models=(ModelEntry(str(tmp_path / "m32")), ModelEntry(paths[2])),
    )
    from train_judge.merge.plan import make_plan

    plan = make_plan(cfg)
    try:
        assert not fused.applies(plan, "a.weight", plan.base, torch.bfloat16)
    finally:
        plan.close()
