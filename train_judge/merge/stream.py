"""Merge one output tensor, a chunk of rows at a time where the method allows it.

``merge_tensor(plan, info)`` yields the merged tensor ``info.name`` as consecutive flat pieces in the
output dtype, which the engine appends to the shard as they come. For element-wise methods (linear,
task arithmetic, DARE-linear, DARE-TIES: ``MethodSpec.elementwise``) a piece is about ``CHUNK``
elements (whole rows): each input's rows are read straight from the file into a fresh buffer
(positioned reads), converted to float32, merged and cast back while they are still in the CPU
cache, so memory is a few chunks whatever the tensor size. DARE's random masks come from one
generator per (tensor, model) drawn in element order, so chunks give the same masks as one whole
draw. TIES goes in two passes: first each model's cut-off magnitude over the whole tensor
(``trim.MagnitudeCut``, from one float32 buffer of ``|delta|``), then chunks trimmed by it, in element
order so ties at the cut-off are kept by position exactly as a whole-tensor trim would. SLERP goes in
two passes too: the dot product and norms (float64 sums over chunks), then ``c_a a + c_b b`` by chunks.

Tensors no LoRA expert touches are the base, copied chunk by chunk (bit for bit in its dtype);
non-float tensors are copied from the reference model.

Example (flat row ranges of a 5 x 3 tensor in chunks of 2 rows):
    >>> list(row_chunks((5, 3), 6))
    [(0, 2), (2, 4), (4, 5)]
"""

from __future__ import annotations

import math
from typing import Iterator

import torch

from .methods import TensorContext
from .plan import Plan
from .safetensors_io import DTYPES, TensorInfo
from .sources import Checkpoint, LoraAdapter, Source
from .trim import MagnitudeCut

CHUNK = 1 << 20
"""Target elements per piece for element-wise methods (4 MB per float32 buffer)."""


def row_chunks(shape: tuple[int, ...], chunk: int) -> Iterator[tuple[int, int]]:
    """``(r0, r1)`` ranges of whole rows (first dimension) of about ``chunk`` elements each."""
    rows = shape[0] if shape else 1
    row = 1
    for s in shape[1:]:
        row *= s
    step = max(1, chunk // max(row, 1))
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)


def _untouched(plan: Plan, name: str) -> bool:
    return all(isinstance(m, LoraAdapter) and name not in m.pairs and name not in m.full for m in plan.models)


def merge_tensor(plan: Plan, info: TensorInfo) -> Iterator[torch.Tensor]:
    """The merged tensor ``info.name`` in the output dtype, as consecutive flat pieces."""
    cfg, spec, name = plan.config, plan.config.spec, info.name
    ref_info = plan.reference.infos[name]
    out_dtype = DTYPES[info.dtype]
    shape, n = ref_info.shape, ref_info.numel
    if n == 0:
        yield torch.empty(0, dtype=out_dtype)
        return
    row = n // (shape[0] if shape else 1)
    if not ref_info.is_float:
        for r0, r1 in row_chunks(shape, CHUNK):
            yield plan.reference.read_range(name, r0 * row, (r1 - r0) * row)
        return
    need_base = spec.uses_deltas or any(isinstance(m, LoraAdapter) for m in plan.models)
    base = plan.base if plan.base is not None and need_base else None
    scale = None
    if base is not None and _untouched(plan, name):
        # every input is the base: the base itself, except for linear without normalize, a plain
        # weighted sum: sum_i w_i * base, as for the adapted tensors
        if spec.name == "linear" and not cfg.method_params()["normalize"] and sum(cfg.weights()) != 1.0:
            scale = sum(cfg.weights())
        else:
            for r0, r1 in row_chunks(shape, CHUNK):
                yield base.read_range(name, r0 * row, (r1 - r0) * row).to(out_dtype)
            return
    cuts = _magnitude_cuts(plan, name, base, shape, row) if scale is None and _trims(plan) else None
    if spec.name == "slerp" and scale is None:  # two passes: <a, b>, |a|, |b| over chunks, then c_a a + c_b b
        yield from _slerp(plan, name, base, shape, row, out_dtype)
        return
    chunked = spec.elementwise or scale is not None or cuts is not None
    chunks = row_chunks(shape, CHUNK) if chunked else [(0, shape[0] if shape else 1)]
    generators: dict[int, torch.Generator] = {}
    for r0, r1 in chunks:
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        yield _merge_rows(plan, name, base, r0, r1, row, cshape, scale, generators, cuts).to(out_dtype).reshape(-1)


def _full_rows(plan: Plan, m: Source, name: str, start: int, count: int, r0: int, r1: int,
               cshape: tuple[int, ...], base32: torch.Tensor | None) -> torch.Tensor:
    """Model ``m``'s full tensor on rows ``r0:r1`` (float32; a LoRA expert is base + delta)."""
    if isinstance(m, LoraAdapter):
        assert base32 is not None  # make_plan requires a base with LoRA experts
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return base32 + d if d is not None else base32
    return m.read_range(name, start, count).view(cshape).float()


def _slerp(plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int,
           out_dtype: torch.dtype) -> Iterator[torch.Tensor]:
    """SLERP a chunk at a time: float64 sums of the dot product and squared norms first, then the pieces."""
    from .slerp import slerp_coefficients, t_for

    def pair(r0: int, r1: int) -> tuple[torch.Tensor, torch.Tensor]:
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        start, count = r0 * row, (r1 - r0) * row
        base32 = base.read_range(name, start, count).view(cshape).float() if base is not None else None
        a, b = (_full_rows(plan, m, name, start, count, r0, r1, cshape, base32) for m in plan.models)
        return a.reshape(-1), b.reshape(-1)

    dot = aa = bb = 0.0
    for r0, r1 in row_chunks(shape, CHUNK):
        a, b = pair(r0, r1)
        dot += float(torch.dot(a, b))
        aa += float(torch.dot(a, a))
        bb += float(torch.dot(b, b))
    ca, cb = slerp_coefficients(dot, math.sqrt(aa), math.sqrt(bb), t_for(name, plan.config.method_params()))
    for r0, r1 in row_chunks(shape, CHUNK):
        a, b = pair(r0, r1)
        yield torch.mul(a, ca).add_(b, alpha=cb).to(out_dtype)


def _trims(plan: Plan) -> bool:
    """True for TIES: a magnitude trim, then element-wise consensus (merged here in two passes)."""
    return getattr(plan.config.spec.merge, "sparsify", None) == "magnitude"


def _delta_rows(plan: Plan, m: Source, name: str, start: int, count: int, r0: int, r1: int,
                cshape: tuple[int, ...], base32: torch.Tensor) -> torch.Tensor:
    """Model ``m``'s task vector on rows ``r0:r1`` (float32, a fresh tensor)."""
    if isinstance(m, LoraAdapter):
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return d if d is not None else torch.zeros_like(base32)
    # convert, then subtract in place: a mixed-dtype torch.sub takes a slow, unvectorized path (~20x)
    return m.read_range(name, start, count).view(cshape).float().sub_(base32)


def _magnitude_cuts(plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...],
                    row: int) -> list[MagnitudeCut]:
    """First pass of TIES: each model's cut-off magnitude over the whole tensor, from one float32 buffer
    of ``|delta|`` filled a chunk at a time (the only tensor-sized buffer a TIES merge holds)."""
    assert base is not None
    mag = torch.empty(math.prod(shape), dtype=torch.float32)
    cuts = []
    for i, (m, density) in enumerate(zip(plan.models, plan.config.densities())):
        k = density if density is not None else 1.0
        if k >= 1.0:
            cuts.append(MagnitudeCut(-1.0, 0))
            continue
        for r0, r1 in row_chunks(shape, CHUNK):
            cshape = (r1 - r0, *shape[1:]) if shape else ()
            start, count = r0 * row, (r1 - r0) * row
            base32 = base.read_range(name, start, count).view(cshape).float()
            torch.abs(_delta_rows(plan, m, name, start, count, r0, r1, cshape, base32).view(-1),
                      out=mag[start:start + count])
        cuts.append(MagnitudeCut.measure(mag, k))
    return cuts


def _merge_rows(plan: Plan, name: str, base: Checkpoint | None, r0: int, r1: int, row: int,
                cshape: tuple[int, ...], scale: float | None, generators: dict[int, torch.Generator],
                cuts: list[MagnitudeCut] | None = None) -> torch.Tensor:
    """Rows ``r0:r1`` of the merged tensor, float32 (``scale``: the untouched-tensor shortcut above)."""
    cfg, spec = plan.config, plan.config.spec
    start, count = r0 * row, (r1 - r0) * row
    base32 = base.read_range(name, start, count).view(cshape).float() if base is not None else None
    if scale is not None:
        assert base32 is not None
        return base32.mul_(scale)
    inputs = []
    for m in plan.models:
        if spec.uses_deltas:
            assert base32 is not None
            inputs.append(_delta_rows(plan, m, name, start, count, r0, r1, cshape, base32))
        else:
            inputs.append(_full_rows(plan, m, name, start, count, r0, r1, cshape, base32))
    densities = cfg.densities()
    if cuts is not None:  # TIES: trimmed here by the whole-tensor cut, so the method's own trim is off
        for d, cut in zip(inputs, cuts):
            cut.apply(d)
        densities = [1.0] * len(inputs)
    ctx = TensorContext(name=name, tensors=inputs, weights=cfg.weights(), densities=densities,
                        params=cfg.method_params(), seed=cfg.seed, generators=generators)
    merged = spec.merge(ctx)
    del inputs, ctx
    if spec.uses_deltas:
        assert base32 is not None
        merged = merged.add_(base32)
    return merged
