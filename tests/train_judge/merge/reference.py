"""The plain-torch reference of each merge method, whole tensors at a time, for the tests to check the
kernels against (``train_judge.merge`` has one implementation, the numba kernels of ``kernels``).

Each formula is written with the float32 operations the kernels repeat (``add_(x, alpha=w)`` is one
FMA in torch's vectorized kernels, as ``kernels._fma``; a division stays a division), so outputs
are compared byte for byte. What a whole-tensor formula cannot repeat is said where it matters:
SLERP's sums of ``<a, b>``, ``|a|^2``, ``|b|^2`` are MKL dots, whose summation order depends on the
chunking, so ``slerp`` sums over the engine's row chunks; a LoRA expert's ``delta W`` is a matmul
whose rounding may depend on how many rows are computed at once (compare those with a tolerance).
"""

from __future__ import annotations

import math

import torch
from safetensors.torch import load_file

from train_judge.merge import MergeConfig, chunking
from train_judge.merge.methods import seed_for
from train_judge.merge.slerp import slerp_coefficients, t_for
from train_judge.merge.sources import LoraAdapter, open_source
from train_judge.merge.trim import keep_count


def magnitude_trim(delta: torch.Tensor, density: float) -> torch.Tensor:
    """TIES's trim in place: keep exactly ``keep_count(density, n)`` entries of largest magnitude, ties at the
    cut-off kept by position (a stable sort), the rest multiplied by 0.0 (so a dropped negative is -0.0)."""
    flat = delta.view(-1)
    k = keep_count(density, flat.numel())
    if k >= flat.numel():
        return delta
    keep = torch.zeros_like(flat)
    keep[torch.sort(flat.abs(), descending=True, stable=True).indices[:k]] = 1.0
    flat.mul_(keep)
    return delta


def random_drop(delta: torch.Tensor, density: float, generator: torch.Generator) -> torch.Tensor:
    """DARE in place: drop each entry whose uniform draw (``generator``, in element order) is ``>= density``
    (it becomes +0.0: the float bits ANDed with 0), then rescale by ``1 / density``."""
    if density >= 1.0:
        return delta
    draws = torch.empty(delta.numel()).uniform_(generator=generator)
    mask = draws.lt_(density).view(torch.int32).bitwise_right_shift_(29).neg_()  # all ones where kept
    delta.view(-1).view(torch.int32).bitwise_and_(mask)
    return delta.div_(density)


def task_vectors(
    deltas: list[torch.Tensor],
    weights: list[float],
    densities: list[float],
    sparsify: str,
    consensus: bool,
    normalize: bool,
    lam: float,
    generator: list[torch.Generator] | None = None,
) -> torch.Tensor:
    """The merged delta (``lambda`` applied) of task arithmetic, TIES, DARE-TIES, DARE-linear; overwrites ``deltas``."""
    for i, d in enumerate(deltas):
        if sparsify == "magnitude":
            magnitude_trim(d, densities[i])
        elif sparsify == "random":
            assert generator is not None
            random_drop(d, densities[i], generator[i])
    if not consensus:  # a weighted sum, lambda folded into the weights (x * 1.0 is x)
        ws = [lam * w for w in weights]
        total = deltas[0] if ws[0] == 1.0 else deltas[0].mul_(ws[0])
        for w, d in zip(ws[1:], deltas[1:], strict=True):
            total.add_(d, alpha=w)
        return total
    total = torch.mul(deltas[0], weights[0])
    for w, d in zip(weights[1:], deltas[1:], strict=True):
        total.add_(d, alpha=w)
    elected = total.sign_()  # 0 where the sum is exactly 0
    den = torch.zeros_like(elected) if normalize else None
    num = None
    for w, d in zip(weights, deltas, strict=True):
        agree = torch.mul(d, elected).gt_(0.0)  # 1.0 where sign(d) = elected != 0
        d.mul_(agree)
        num = d.mul_(w) if num is None else num.add_(d, alpha=w)
        if den is not None:
            den.add_(agree, alpha=w)
    assert num is not None
    out = num if den is None else num.div_(den.clamp_(min=1e-30))
    return out if lam == 1.0 else out.mul_(lam)


def linear(tensors: list[torch.Tensor], weights: list[float], normalize: bool) -> torch.Tensor:
    """``sum w_i m_i`` (divided by ``sum w_i`` when ``normalize``, folded into the weights)."""
    if normalize:
        weights = [w / sum(weights) for w in weights]
    out = torch.mul(tensors[0], weights[0])
    for w, t in zip(weights[1:], tensors[1:], strict=True):
        out.add_(t, alpha=w)
    return out


def slerp(a: torch.Tensor, b: torch.Tensor, t: float, rows: int) -> torch.Tensor:
    """SLERP of two float32 tensors, the sums taken over chunks of ``rows`` rows (aligned copies, as the engine)."""
    fa, fb, row = a.reshape(-1), b.reshape(-1), a[0].numel() if a.dim() else 1
    dot = aa = bb = 0.0
    for s in range(0, fa.numel(), rows * row):
        x, y = fa[s : s + rows * row].clone(), fb[s : s + rows * row].clone()
        dot, aa, bb = dot + float(torch.dot(x, y)), aa + float(torch.dot(x, x)), bb + float(torch.dot(y, y))
    ca, cb = slerp_coefficients(dot, math.sqrt(aa), math.sqrt(bb), t)
    return torch.mul(a, ca).add_(b, alpha=cb)


def reference_merge(cfg: MergeConfig) -> dict[str, torch.Tensor]:
    """Every floating tensor of the merge ``cfg`` describes, by the formulas above, in the output dtype.

    Inputs are full checkpoints (single ``model.safetensors``) or LoRA experts (``delta W`` of the whole
    tensor); tensors no expert touches are the base (times ``sum w_i`` under linear without normalize)."""
    spec, params = cfg.spec, cfg.method_params()
    base = load_file(f"{cfg.base_model}/model.safetensors") if cfg.base_model else None
    srcs = [open_source(m.path) for m in cfg.models]
    fulls = [
        None if isinstance(s, LoraAdapter) else load_file(f"{m.path}/model.safetensors")
        for s, m in zip(srcs, cfg.models, strict=True)
    ]
    names = base if base is not None else fulls[0]
    assert names is not None
    weights, densities = cfg.weights(), [k if k is not None else 1.0 for k in cfg.densities()]
    out: dict[str, torch.Tensor] = {}
    for name, ref in names.items():
        if not ref.is_floating_point():
            continue
        dtype = getattr(torch, cfg.dtype) if cfg.dtype else ref.dtype
        b32 = base[name].float() if base is not None else None
        if b32 is not None and all(isinstance(s, LoraAdapter) and s.delta(name, b32) is None for s in srcs):
            summed = spec.name == "linear" and not params["normalize"] and sum(weights) != 1.0
            out[name] = (b32 * sum(weights) if summed else base[name]).to(dtype)  # type: ignore[index]
            continue
        deltas = []
        for s, full in zip(srcs, fulls, strict=True):
            if full is not None:
                deltas.append(full[name].float().sub_(b32) if spec.uses_deltas else full[name].float())
            else:
                assert b32 is not None
                d = s.delta(name, b32)
                d = torch.zeros_like(b32) if d is None else d
                deltas.append(d if spec.uses_deltas else b32 + d)
        if spec.name == "linear":
            merged = linear(deltas, weights, bool(params["normalize"]))
        elif spec.name == "slerp":
            merged = slerp(deltas[0], deltas[1], t_for(name, params), _chunk_rows(ref))
        else:
            gens = [torch.Generator().manual_seed(seed_for(cfg.seed, name, i)) for i in range(len(deltas))]
            normalize, lam = bool(params.get("normalize", True)), float(params.get("lambda", 1.0))
            merged = task_vectors(deltas, weights, densities, spec.sparsify, spec.consensus, normalize, lam, gens)
            merged = merged.add_(b32)
        out[name] = merged.to(dtype)
    return out


def _chunk_rows(t: torch.Tensor) -> int:
    """Rows per chunk of the engine (``chunking.row_chunks``) for a tensor like ``t``."""
    rows = list(chunking.row_chunks(tuple(t.shape), chunking.CHUNK))
    return rows[0][1] - rows[0][0]
