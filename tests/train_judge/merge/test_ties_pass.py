"""One-pass TIES (train_judge.merge.ties_pass) gives the plain-torch reference's bytes (``reference.py``),
and falls back to two passes when its window misses; chunks computed in two halves (fused._halves)
carry TIES's tie countdown.

Tensors here are large enough for the one-pass window (tens of thousands of entries) and are read in
chunks of 8192 elements; quantized deltas put many equal magnitudes at the cut-off.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.train_judge.merge.reference import reference_merge
from train_judge.merge import MergeConfig, ModelEntry, chunking, fused, run_merge, ties_cuts, ties_pass

SHAPES = {"big.weight": (300, 512), "quant.weight": (512, 256), "norm.weight": (512,)}


def make_models(root, dtype: torch.dtype, first_rows_scale: float = 1.0) -> list[str]:
    """Base + two models; ``quant.weight`` deltas in {0, +-1, ..., +-60} / 512 (~1,000 ties at any cut-off);
    ``first_rows_scale``: the first 20 rows of ``big.weight`` move that much more (a misleading first chunk)."""
    g = torch.Generator().manual_seed(11)
    base = {k: (torch.randn(s, generator=g) * 0.02).to(dtype) for k, s in SHAPES.items()}
    out = []
    for i, m in enumerate(("base", "m1", "m2")):
        t = dict(base)
        if m != "base":
            t = {k: (v.float() + torch.randn(v.shape, generator=g) * 2e-3 * i).to(dtype) for k, v in base.items()}
            q = torch.randint(-60, 61, SHAPES["quant.weight"], generator=g).float() * 2.0**-9
            t["quant.weight"] = (base["quant.weight"].float() + q).to(dtype)
            big = t["big.weight"].float()
            big[:20] = base["big.weight"][:20].float() + (big[:20] - base["big.weight"][:20].float()) * first_rows_scale
            t["big.weight"] = big.to(dtype)
        (root / m).mkdir()
        save_file(t, str(root / m / "model.safetensors"))
        out.append(str(root / m))
    return out


def merge(paths, out, method="ties", out_dtype=None, **params) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The merge's tensors and the reference's, as bytes."""
    densities = params.pop("densities", None)
    models = tuple(ModelEntry(p, density=d) for p, d in zip(paths[1:], densities or [None, None], strict=True))
    cfg = MergeConfig(
        method=method, base_model=paths[0], models=models, parameters=params, output=str(out), dtype=out_dtype, seed=4
    )
    run_merge(cfg)

    def as_bytes(tensors: dict[str, torch.Tensor]) -> dict[str, bytes]:
        return {k: v.reshape(-1).view(torch.uint8).numpy().tobytes() for k, v in tensors.items()}

    return as_bytes(load_file(str(out / "model.safetensors"))), as_bytes(reference_merge(cfg))


@pytest.fixture
def one_pass_results(monkeypatch):
    """The results of every ``ties_pass.one_pass`` call (True: merged in one pass, False: fell back)."""
    results: list[bool] = []
    real = ties_pass.one_pass
    monkeypatch.setattr(ties_pass, "one_pass", lambda *a: results.append(real(*a)) or results[-1])
    monkeypatch.setattr(chunking, "CHUNK", 8192)
    return results


CASES = {
    "density_0.2": {"density": 0.2},
    "per_model_normalize_off": {"densities": [0.5, 0.3], "weights": [1.0, 0.5], "normalize": False, "lambda": 0.7},
    "density_0.9": {"density": 0.9},
}


@pytest.mark.parametrize(
    "dtype,out_dtype",
    [(torch.bfloat16, None), (torch.float32, None), (torch.float32, "bfloat16"), (torch.float16, "bfloat16")],
)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.integration  # compiles the one-pass numba kernels and merges twice per case
def test_one_pass_gives_the_references_bytes(tmp_path, monkeypatch, one_pass_results, case, dtype, out_dtype):
    paths = make_models(tmp_path, dtype)
    got, want = merge(paths, tmp_path / "o", out_dtype=out_dtype, **dict(CASES[case]))
    assert one_pass_results == [True, True]  # big and quant (norm is one chunk)
    assert got == want


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_float16_or_wider_output_keeps_the_two_pass_path(tmp_path, monkeypatch, one_pass_results, out_dtype):
    """float16 output (computed in float32, then cast) and an output larger than the largest input tensor
    (float32 from bf16: the whole output is held) take the two-pass path."""
    paths = make_models(tmp_path, torch.bfloat16)
    got, want = merge(paths, tmp_path / "o", out_dtype=out_dtype, density=0.3)
    assert one_pass_results == []
    assert got == want


def test_a_misleading_first_chunk_falls_back_to_two_passes(tmp_path, monkeypatch, one_pass_results):
    """big.weight's first chunk (16 rows) moves 50x more: its window sits far above the real cut-off."""
    paths = make_models(tmp_path, torch.bfloat16, first_rows_scale=50.0)
    got, want = merge(paths, tmp_path / "o", density=0.2)
    assert one_pass_results == [False, True]
    assert got == want


def test_window_overflow_falls_back(tmp_path, monkeypatch, one_pass_results):
    real = ties_cuts.window
    monkeypatch.setattr(ties_cuts, "window", lambda *a: real(*a)[:2] + (10,))  # room for 10 elements per model
    paths = make_models(tmp_path, torch.bfloat16)
    got, want = merge(paths, tmp_path / "o", density=0.2)
    assert one_pass_results == [False, False]
    assert got == want


@pytest.mark.parametrize(
    "method,params",
    [
        ("ties", {"density": 0.4}),
        ("ties", {"densities": [0.3, 0.6]}),
        ("dare_ties", {"density": 0.7}),
        ("task_arithmetic", {"lambda": 0.9}),
    ],
)
def test_chunks_in_two_halves_give_the_references_bytes(tmp_path, monkeypatch, method, params):
    """One chunk per tensor (the default chunk size): quant.weight (131,072 entries, ties at the cut-off)
    and big.weight are computed in two halves, the second half starting from the first's tie count."""
    calls = []
    real = fused._halves
    monkeypatch.setattr(fused, "_halves", lambda run, count, n, ties: (calls.append(n), real(run, count, n, ties)))
    paths = make_models(tmp_path, torch.bfloat16)
    got, want = merge(paths, tmp_path / "o", method=method, **dict(params))
    assert sorted(c for c in calls if c >= chunking.SPLIT) == [131072, 153600]
    assert got == want


def test_upper_edge():
    assert ties_pass.upper_edge(0x3F80) == torch.tensor(0x3F80FFFF, dtype=torch.int32).view(torch.float32).item()
