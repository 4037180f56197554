"""Every merge method on tiny checkpoints, against tensors computed by hand (train_judge.merge.*)."""

from __future__ import annotations

import math

import pytest
import torch

from tests.train_judge.merge.merge_util import BASE, M1, M2, POS, load_output, save_model
from tests.train_judge.merge.reference import magnitude_trim
from train_judge.merge import MergeConfig, ModelEntry, run_merge
from train_judge.merge.methods import seed_for


@pytest.fixture()
def models(tmp_path):
    return {
        "base": save_model(tmp_path / "base", BASE),
        "m1": save_model(tmp_path / "m1", M1),
        "m2": save_model(tmp_path / "m2", M2, shards=2),
    }  # m2 sharded: index + 2 files


def merge(models, tmp_path, method, weights=(None, None), densities=(None, None), **params):
    base = method not in ("linear", "slerp")  # those take no base_model with full checkpoints
    cfg = MergeConfig(
        method=method,
        base_model=str(models["base"]) if base else None,
        output=str(tmp_path / "out"),
        models=tuple(
            ModelEntry(str(models[k]), weight=w, density=d)
            for k, w, d in zip(("m1", "m2"), weights, densities, strict=True)
        ),
        parameters=params,
        seed=params.pop("seed", 0) if "seed" in params else 0,
    )
    run_merge(cfg)
    return load_output(tmp_path / "out")


# (method, weights, densities, parameters, expected w, expected n), all worked out by hand from
# d1 = [[4, -1], [0.5, -3]], d2 = [[-2, 2.5], [-5, 1]] (n: d1 = [1, -1], d2 = [0, 2]) and base.
CASES = [
    ("linear", (None, None), (None, None), {}, [[2.0, 2.75], [0.75, 3.0]], [1.5, 1.5]),
    ("linear", (1.0, 3.0), (None, None), {}, [[0.5, 3.625], [-0.625, 4.0]], [1.25, 2.25]),
    ("linear", (1.0, 1.0), (None, None), {"normalize": False}, [[4.0, 5.5], [1.5, 6.0]], [3.0, 3.0]),
    # base + lambda * (w1 d1 + w2 d2)
    ("task_arithmetic", (1.0, 0.5), (None, None), {}, [[4.0, 2.25], [1.0, 1.5]], [2.0, 1.0]),
    ("task_arithmetic", (None, None), (None, None), {"lambda": 0.5}, [[2.0, 2.75], [0.75, 3.0]], [1.5, 1.5]),
    ("task_arithmetic", (1.0, -1.0), (None, None), {}, [[7.0, -1.5], [8.5, 0.0]], [2.0, -2.0]),
    # TIES density 0.5: trimmed d1 = [[4, 0], [0, -3]], d2 = [[0, 2.5], [-5, 0]] (n: both entries of d1
    # tie at |1| so both stay; d2 = [0, 2]); signs [[+, +], [-, -]]; n signs [+, +].
    ("ties", (None, None), (0.5, 0.5), {}, [[5.0, 4.5], [-2.0, 1.0]], [2.0, 3.0]),
    ("ties", (None, None), (None, None), {"density": 0.5, "lambda": 2.0}, [[9.0, 7.0], [-7.0, -2.0]], [3.0, 5.0]),
    # TIES density 1, weights (1, 3): sums [[-2, 6.5], [-14.5, 0]] elect [[-, +], [-, 0]];
    # disjoint weighted means [[-2, 2.5], [-5, 0]]; n: sums [1, 5] -> [+, +]: [1, 2]
    ("ties", (1.0, 3.0), (1.0, 1.0), {}, [[-1.0, 4.5], [-2.0, 4.0]], [2.0, 3.0]),
    # density 1: DARE keeps everything, so DARE-TIES = TIES and DARE-linear = task arithmetic
    ("dare_ties", (None, None), (1.0, 1.0), {}, [[5.0, 4.5], [-2.0, 1.0]], [2.0, 3.0]),
    ("dare_linear", (1.0, 0.5), (None, None), {"density": 1.0}, [[4.0, 2.25], [1.0, 1.5]], [2.0, 1.0]),
]


@pytest.mark.parametrize("method,weights,densities,params,want_w,want_n", CASES)
def test_method_matches_hand_computed(models, tmp_path, method, weights, densities, params, want_w, want_n):
    out = merge(models, tmp_path, method, weights, densities, **params)
    assert out["w"].tolist() == want_w
    assert out["n"].tolist() == want_n
    assert out["pos"].tolist() == POS and out["pos"].dtype == torch.int64
    assert out["w"].dtype == torch.float32


def test_slerp_hand_computed(tmp_path):
    a = save_model(tmp_path / "a", {"w": [[1.0, 0.0], [0.0, 0.0]], "v": [1.0, 2.0]})
    b = save_model(tmp_path / "b", {"w": [[0.0, 1.0], [0.0, 0.0]], "v": [2.0, 4.0]})

    def run(name, **params):
        cfg = MergeConfig(
            method="slerp",
            models=(ModelEntry(str(a)), ModelEntry(str(b))),
            output=str(tmp_path / name),
            parameters=params,
        )
        run_merge(cfg)
        return load_output(tmp_path / name)

    half = run("half", t=0.5)
    r = math.sqrt(0.5)  # orthogonal unit vectors: theta = pi/2, weights sin(pi/4)/1 each
    assert half["w"].flatten().tolist() == pytest.approx([r, r, 0.0, 0.0], abs=1e-6)
    assert half["v"].tolist() == pytest.approx([1.5, 3.0])  # colinear: linear interpolation
    third = run("third", t=1 / 3, t_by_name={"v": 1.0})
    # theta = pi/2, t = 1/3: sin(pi/3) = 0.8660254, sin(pi/6) = 0.5
    assert third["w"].flatten().tolist() == pytest.approx([0.8660254, 0.5, 0.0, 0.0], abs=1e-6)
    assert third["v"].tolist() == [2.0, 4.0]  # t_by_name: t = 1 -> the second model
    assert run("zero", t=0.0)["w"].flatten().tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dtype_preserved(tmp_path, dtype):
    base = save_model(tmp_path / "base", BASE, dtype)
    m1, m2 = save_model(tmp_path / "m1", M1, dtype), save_model(tmp_path / "m2", M2, dtype)
    cfg = MergeConfig(
        method="ties",
        base_model=str(base),
        models=(ModelEntry(str(m1)), ModelEntry(str(m2))),
        output=str(tmp_path / "out"),
        parameters={"density": 0.5},
    )
    run_merge(cfg)
    out = load_output(tmp_path / "out")
    assert out["w"].dtype == dtype and out["n"].dtype == dtype
    assert out["w"].float().tolist() == [[5.0, 4.5], [-2.0, 1.0]]


def test_output_dtype_override(models, tmp_path):
    cfg = MergeConfig(
        method="linear",
        models=(ModelEntry(str(models["m1"])), ModelEntry(str(models["m2"]))),
        output=str(tmp_path / "out"),
        dtype="bfloat16",
    )
    run_merge(cfg)
    out = load_output(tmp_path / "out")
    assert out["w"].dtype == torch.bfloat16 and out["pos"].dtype == torch.int64
    assert '"bfloat16"' in (tmp_path / "out" / "config.json").read_text()


def big_models(tmp_path, n=4096):
    g = torch.Generator().manual_seed(1)
    base = {"w": torch.randn(n, generator=g).tolist()}
    m1 = {"w": (torch.tensor(base["w"]) + torch.randn(n, generator=g)).tolist()}
    m2 = {"w": (torch.tensor(base["w"]) + torch.randn(n, generator=g)).tolist()}
    return {
        "base": save_model(tmp_path / "base", base),
        "m1": save_model(tmp_path / "m1", m1),
        "m2": save_model(tmp_path / "m2", m2),
    }


@pytest.mark.parametrize("method", ["dare_linear", "dare_ties"])
def test_dare_is_seeded(tmp_path, method):
    models = big_models(tmp_path)
    outs = {}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        cfg = MergeConfig(
            method=method,
            base_model=str(models["base"]),
            output=str(tmp_path / name),
            seed=seed,
            models=(ModelEntry(str(models["m1"])), ModelEntry(str(models["m2"]))),
            parameters={"density": 0.3},
        )
        run_merge(cfg)
        outs[name] = load_output(tmp_path / name)["w"]
    assert torch.equal(outs["a"], outs["b"])
    assert not torch.equal(outs["a"], outs["c"])


def test_dare_linear_drops_and_rescales(tmp_path):
    """One expert, density 0.25: each delta entry is either dropped (0) or multiplied by 4."""
    models = big_models(tmp_path, n=8192)
    cfg = MergeConfig(
        method="dare_linear",
        base_model=str(models["base"]),
        output=str(tmp_path / "out"),
        models=(ModelEntry(str(models["m1"])),),
        parameters={"density": 0.25},
    )
    run_merge(cfg)
    base = load_output(models["base"])["w"]
    d = load_output(models["m1"])["w"] - base
    got = load_output(tmp_path / "out")["w"] - base
    kept = got.abs() > 1e-6
    assert torch.allclose(got[kept], 4 * d[kept], atol=1e-4)
    assert 0.2 < kept.float().mean().item() < 0.3


def test_reference_magnitude_trim_keeps_top_fraction():
    """The tests' plain-torch trim (reference.py, which the kernels are checked against) on hand values."""
    t = torch.tensor([[1.0, -9.0], [5.0, -3.0], [7.0, 2.0]])
    assert magnitude_trim(t, 0.5).tolist() == [[0.0, -9.0], [5.0, 0.0], [7.0, 0.0]]
    assert magnitude_trim(t, 1 / 6).tolist() == [[0.0, -9.0], [0.0, 0.0], [0.0, 0.0]]
    assert torch.equal(magnitude_trim(t, 1.0), t)


@pytest.mark.parametrize("method", ["dare_linear", "dare_ties"])
def test_dare_in_chunks_equals_one_whole_draw(tmp_path, monkeypatch, method):
    """Element-wise methods merge a chunk of rows at a time; DARE's masks must not depend on the chunking:
    the result equals drop masks drawn for the whole tensor at once (computed independently here)."""
    from train_judge.merge import chunking

    models = big_models(tmp_path, n=4096)
    outs = {}
    for chunk in (1 << 20, 100):  # one piece, then 41 pieces
        monkeypatch.setattr(chunking, "CHUNK", chunk)
        cfg = MergeConfig(
            method=method,
            base_model=str(models["base"]),
            output=str(tmp_path / f"out{chunk}"),
            models=(ModelEntry(str(models["m1"])),),
            parameters={"density": 0.3},
            seed=3,
        )
        run_merge(cfg)
        outs[chunk] = load_output(tmp_path / f"out{chunk}")["w"]
    assert torch.equal(outs[100], outs[1 << 20])
    base, m1 = load_output(models["base"])["w"], load_output(models["m1"])["w"]
    keep = torch.rand(4096, generator=torch.Generator().manual_seed(seed_for(3, "w", 0))) < 0.3
    want = base + torch.where(keep, (m1 - base) / 0.3, torch.zeros(()))
    assert torch.allclose(outs[100], want, atol=1e-6)
