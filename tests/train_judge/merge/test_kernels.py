"""The numba kernels (train_judge.merge.kernels / fused) give the plain-torch reference's bytes.

Every method merges small checkpoints (odd shapes, bf16 deltas full of equal magnitudes, signed
zeros) in chunks of a few rows; each output tensor must be byte for byte the reference's
(``reference.py``: each method's formulas in plain torch over whole tensors), for bf16, float16 and
float32 inputs and outputs, mixed input dtypes, and TIES's cut-offs found in one or two passes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from prom_reward.errors import ConfigError
from tests.train_judge.merge.reference import reference_merge
from train_judge.merge import MergeConfig, ModelEntry, chunking, config_from_dict, kernels, run_merge, ties_cuts
from train_judge.merge.trim import keep_count

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


def case_config(paths, tmp_path, case, out_dtype=None, tag="") -> MergeConfig:
    params, dens = CASES[case]
    method = case.split("_sum")[0].split("_per_model")[0].split("_t_by_name")[0]
    base = None if method in ("linear", "slerp") else paths[0]
    models = tuple(ModelEntry(p, density=d) for p, d in zip(paths[1:], dens or [None] * 2, strict=False))
    out = tmp_path / f"out-{case}-{out_dtype}{tag}"
    return MergeConfig(
        method=method, base_model=base, models=models, parameters=dict(params), output=str(out), dtype=out_dtype, seed=5
    )


def as_bytes(tensors: dict[str, torch.Tensor]) -> dict[str, bytes]:
    return {k: v.reshape(-1).view(torch.uint8).numpy().tobytes() for k, v in tensors.items() if v.is_floating_point()}


def merged_and_reference(cfg: MergeConfig) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The merge's float tensors (run_merge) and the reference's, as bytes."""
    run_merge(cfg)
    return as_bytes(load_file(cfg.output + "/model.safetensors")), as_bytes(reference_merge(cfg))


@pytest.mark.integration  # compiles every numba kernel and merges twice per case
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("case", list(CASES))
def test_kernels_give_the_references_bytes(tmp_path, monkeypatch, case, dtype):
    monkeypatch.setattr(chunking, "CHUNK", 64)  # several chunks per tensor: ties at the cut-off span chunks
    paths = make_models(tmp_path, dtype)
    outs = [None, "float32"] if dtype != torch.bfloat16 else [None, "float32", "float16"]
    for out_dtype in outs:
        got, want = merged_and_reference(case_config(paths, tmp_path, case, out_dtype))
        assert got == want and len(got) == len(SHAPES)


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
        got, want = merged_and_reference(case_config(paths, tmp_path, "slerp", out_dtype))
        assert got == want
    assert len(calls) == 3 * (34 + 5 + 2 + 5)  # in chunks of <= 64 elements (whole rows)


def test_ties_keeps_the_exact_count_with_ties_across_chunks(tmp_path, monkeypatch):
    """One model, weight 1: the merged delta is the trimmed delta; 1000 quantized entries, chunks of 64."""
    monkeypatch.setattr(chunking, "CHUNK", 64)
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
    got, want = merged_and_reference(case_config(paths, tmp_path, case))
    assert got == want


def test_rng_and_the_torch_path_are_refused(tmp_path, monkeypatch):
    """One DARE generator and one path: a config naming rng, or PROM_MERGE_KERNELS set, is told so."""
    data = {"method": "dare_linear", "base_model": "b", "models": ["m"], "output": "o", "parameters": {"density": 0.5}}
    for rng in ("philox", "mt19937"):
        with pytest.raises(ConfigError, match="rng: unknown key: DARE's generator is not chosen any more") as e:
            config_from_dict({**data, "rng": rng})
        assert "remove the rng line" in str(e.value) and "Valid keys: method, base_model" in str(e.value)
    assert "rng" not in config_from_dict(data).to_dict()  # records and fingerprints as before
    paths = make_models(tmp_path, torch.bfloat16)
    cfg = MergeConfig(method="linear", models=(ModelEntry(paths[1]), ModelEntry(paths[2])), output=str(tmp_path / "o"))
    monkeypatch.setenv("PROM_MERGE_KERNELS", "torch")
    with pytest.raises(ConfigError, match="PROM_MERGE_KERNELS: expected it unset .* got 'torch'; unset it"):
        run_merge(cfg)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["task_arithmetic", "ties", "dare_ties", "slerp"])
def test_mixed_input_dtypes_give_the_references_bytes(tmp_path, monkeypatch, case):
    """Inputs of different dtypes (bf16 base, a float32 and a float16 model) are merged from float32 rows."""
    monkeypatch.setattr(chunking, "CHUNK", 64)
    paths = make_models(tmp_path, torch.bfloat16)
    for i, dtype in ((1, torch.float32), (2, torch.float16)):
        (tmp_path / f"w{i}").mkdir()
        tensors = {k: v.to(dtype) for k, v in load_file(paths[i] + "/model.safetensors").items()}
        save_file(tensors, str(tmp_path / f"w{i}" / "model.safetensors"))
    mixed = [paths[0], str(tmp_path / "w1"), str(tmp_path / "w2")]
    for out_dtype in (None, "float16"):
        got, want = merged_and_reference(case_config(mixed, tmp_path, case, out_dtype))
        assert got == want and len(got) == len(SHAPES)
