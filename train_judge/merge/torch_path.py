"""The torch path of ``stream.merge_tensor``: a tensor merged by its method's torch code, by chunks.

For element-wise methods (linear, task arithmetic, DARE-linear, DARE-TIES: ``MethodSpec.elementwise``)
a piece is about ``chunking.CHUNK`` elements (whole rows): each input's rows are read into a reused
buffer (positioned reads, on a worker thread one chunk ahead), converted to float32, merged and cast
back while still in the CPU cache. DARE's masks come from one generator per (tensor, model) drawn in
element order, so chunks give the same masks as one whole draw. TIES goes in two passes: each model's
cut-off magnitude over the whole tensor (``trim.MagnitudeCut``), then chunks trimmed by it in element
order, so ties at the cut-off are kept by position as a whole-tensor trim would. SLERP: float64 sums
of the dot product and norms over chunks, then ``c_a a + c_b b`` by chunks. LoRA experts compute
their deltas here (``LoraAdapter.delta_rows``); other methods get the whole tensor in one piece.

Example (the float32 view of a chunk's raw rows: float32 input is used as it is):
    >>> raw = torch.arange(6, dtype=torch.float32)
    >>> _f32("in", raw, (2, 3)).data_ptr() == raw.data_ptr()
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import torch

from . import chunking
from .chunking import BUFFERS, piece, prefetched, row_chunks
from .methods import TensorContext
from .philox import philox_key, uniform_job
from .plan import Plan
from .safetensors_io import DTYPES
from .slerp import slerp_coefficients, t_for
from .sources import Checkpoint, LoraAdapter, Source
from .trim import MagnitudeCut


def merge(
    plan: Plan,
    name: str,
    base: Checkpoint | None,
    shape: tuple[int, ...],
    row: int,
    out_dtype: torch.dtype,
    scale: float | None,
) -> Iterator[torch.Tensor]:
    """The merged tensor ``name`` as consecutive flat pieces in ``out_dtype`` (as ``stream.merge_tensor``);
    ``scale``: every input is the base, so the output is ``scale * base``."""
    cfg, spec = plan.config, plan.config.spec
    trims = getattr(spec.merge, "sparsify", None) == "magnitude"  # TIES: cut-offs first, then by chunks
    cuts = _magnitude_cuts(plan, name, base, shape, row) if scale is None and trims else None
    if spec.name == "slerp" and scale is None:  # two passes: <a, b>, |a|, |b| over chunks, then c_a a + c_b b
        yield from _slerp(plan, name, base, shape, row, out_dtype)
        return
    chunked = spec.elementwise or scale is not None or cuts is not None
    chunks = list(row_chunks(shape, chunking.CHUNK)) if chunked else [(0, shape[0] if shape else 1)]
    generators: dict[int, torch.Generator] = {}
    ctx0 = TensorContext(
        name=name,
        tensors=[],
        weights=cfg.weights(),
        densities=cfg.densities(),
        params=cfg.method_params(),
        seed=cfg.seed,
        generators=generators,
    )
    random = getattr(spec.merge, "sparsify", None) == "random" and scale is None
    densities = cfg.densities()
    checkpoints = [(j, m) for j, m in enumerate([base, *plan.models]) if isinstance(m, Checkpoint)]

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row
        out: list[Callable[[], Any]] = [
            lambda: [
                m.read_range(name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[m.infos[name].dtype]))
                for j, m in checkpoints
            ]
        ]
        if random:  # each model's draws, in element order (one chunk at a time per generator), or Philox's
            for i, k in enumerate(densities):
                if k is not None and k < 1.0:
                    out.append(
                        uniform_job(
                            cfg.rng,
                            ctx0.generator(i),
                            philox_key(cfg.seed, name, i),
                            BUFFERS.get(("draws", slot, i), count),
                            start,
                        )
                    )
        return out

    for slot, r0, r1, results in prefetched(chunks, jobs):
        raws: dict[int, torch.Tensor] = dict(zip([j for j, _ in checkpoints], results[0], strict=True))
        draws = None
        if random:
            it = iter(results[1:])
            draws = [next(it) if k is not None and k < 1.0 else None for k in densities]
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        merged = _merge_rows(plan, name, base, raws, r0, r1, row, cshape, scale, generators, cuts, draws)
        yield piece(merged.reshape(-1), out_dtype, slot)


def _f32(key: Hashable, raw: torch.Tensor, cshape: tuple[int, ...]) -> torch.Tensor:
    """``raw`` as float32 in shape ``cshape``: converted into a reused buffer (``raw`` itself if float32)."""
    if raw.dtype == torch.float32:
        return raw.view(cshape)
    return BUFFERS.get(key, raw.numel()).copy_(raw).view(cshape)


def _full_rows(
    plan: Plan,
    m: Source,
    j: int,
    name: str,
    raws: dict[int, torch.Tensor],
    r0: int,
    r1: int,
    cshape: tuple[int, ...],
    base32: torch.Tensor | None,
) -> torch.Tensor:
    """Model ``m`` (input ``j``)'s full tensor on rows ``r0:r1`` (float32; a LoRA expert is base + delta)."""
    if isinstance(m, LoraAdapter):
        assert base32 is not None  # make_plan requires a base with LoRA experts
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return base32 + d if d is not None else base32
    return _f32(("in", j), raws[j], cshape)


def _delta_rows(
    plan: Plan,
    m: Source,
    j: int,
    name: str,
    raws: dict[int, torch.Tensor],
    r0: int,
    r1: int,
    cshape: tuple[int, ...],
    base32: torch.Tensor,
) -> torch.Tensor:
    """Model ``m`` (input ``j``)'s task vector on rows ``r0:r1`` (float32, a tensor the caller may overwrite)."""
    if isinstance(m, LoraAdapter):
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return d if d is not None else torch.zeros_like(base32)
    # convert, then subtract in place: a mixed-dtype torch.sub takes a slow, unvectorized path (~20x)
    return _f32(("in", j), raws[j], cshape).sub_(base32)


def _read_all(
    plan: Plan, name: str, base: Checkpoint | None, slot: int, r0: int, r1: int, row: int
) -> dict[int, torch.Tensor]:
    """Rows ``r0:r1`` of every checkpoint input (0: the base, j: model j - 1), stored dtype, slot buffers."""
    start, count = r0 * row, (r1 - r0) * row
    return {
        j: m.read_range(name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[m.infos[name].dtype]))
        for j, m in enumerate([base, *plan.models])
        if isinstance(m, Checkpoint)
    }


def _slerp(
    plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int, out_dtype: torch.dtype
) -> Iterator[torch.Tensor]:
    """SLERP a chunk at a time: float64 sums of the dot product and squared norms first, then the pieces."""
    chunks = list(row_chunks(shape, chunking.CHUNK))

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        return [lambda: _read_all(plan, name, base, slot, r0, r1, row)]

    def pair(raws: dict[int, torch.Tensor], r0: int, r1: int) -> tuple[torch.Tensor, torch.Tensor]:
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        base32 = _f32(("in", 0), raws[0], cshape) if base is not None else None
        a, b = (_full_rows(plan, m, j, name, raws, r0, r1, cshape, base32) for j, m in enumerate(plan.models, 1))
        return a.reshape(-1), b.reshape(-1)

    dot = aa = bb = 0.0
    for _, r0, r1, (raws,) in prefetched(chunks, jobs):
        a, b = pair(raws, r0, r1)
        dot += float(torch.dot(a, b))
        aa += float(torch.dot(a, a))
        bb += float(torch.dot(b, b))
    ca, cb = slerp_coefficients(dot, math.sqrt(aa), math.sqrt(bb), t_for(name, plan.config.method_params()))
    for slot, r0, r1, (raws,) in prefetched(chunks, jobs):
        a, b = pair(raws, r0, r1)
        yield piece(torch.mul(a, ca, out=BUFFERS.get("out", a.numel())).add_(b, alpha=cb), out_dtype, slot)


def _magnitude_cuts(
    plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int
) -> list[MagnitudeCut]:
    """First pass of TIES: each model's cut-off magnitude over the whole tensor, from one float32 buffer
    of ``|delta|`` filled a chunk at a time (the only tensor-sized buffer a TIES merge holds), with a
    histogram of its high 16 bits gathered on the way (``MagnitudeCut.measure``)."""
    assert base is not None
    n = math.prod(shape)
    mag = BUFFERS.get("mag", n)  # kept for the next tensors: page faults on a fresh one cost more than the rest
    chunks = list(row_chunks(shape, chunking.CHUNK))
    cuts = []
    for i, (m, density) in enumerate(zip(plan.models, plan.config.densities(), strict=True)):
        k = density if density is not None else 1.0
        if k >= 1.0:
            cuts.append(MagnitudeCut(-1.0, 0))
            continue
        hist = torch.zeros(1 << 15, dtype=torch.int64)

        def jobs(slot: int, r0: int, r1: int, m: Source = m) -> list[Callable[[], Any]]:
            start, count = r0 * row, (r1 - r0) * row
            srcs = [(0, base)] + ([(1, m)] if isinstance(m, Checkpoint) else [])
            return [
                lambda: {
                    j: s.read_range(
                        name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[s.infos[name].dtype])
                    )
                    for j, s in srcs
                }
            ]

        for _, r0, r1, (raws,) in prefetched(chunks, jobs):
            cshape = (r1 - r0, *shape[1:]) if shape else ()
            start, count = r0 * row, (r1 - r0) * row
            base32 = _f32(("in", 0), raws[0], cshape)
            raws_m = {i + 1: raws[1]} if 1 in raws else {}
            part = mag[start : start + count]
            torch.abs(_delta_rows(plan, m, i + 1, name, raws_m, r0, r1, cshape, base32).view(-1), out=part)
            hist += torch.bincount(
                torch.bitwise_right_shift(part.view(torch.int32), 16, out=BUFFERS.get("cut", count).view(torch.int32)),
                minlength=1 << 15,
            )
        cuts.append(MagnitudeCut.measure(mag, k, hist))
    return cuts


def _merge_rows(
    plan: Plan,
    name: str,
    base: Checkpoint | None,
    raws: dict[int, torch.Tensor],
    r0: int,
    r1: int,
    row: int,
    cshape: tuple[int, ...],
    scale: float | None,
    generators: dict[int, torch.Generator],
    cuts: list[MagnitudeCut] | None = None,
    draws: list[torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """Rows ``r0:r1`` of the merged tensor, float32 (``scale``: the untouched-tensor shortcut above)."""
    cfg, spec = plan.config, plan.config.spec
    base32 = _f32(("in", 0), raws[0], cshape) if base is not None else None
    if scale is not None:
        assert base32 is not None
        return torch.mul(base32, scale, out=BUFFERS.get("out", base32.numel()).view(cshape))
    inputs = []
    for j, m in enumerate(plan.models, 1):
        if spec.uses_deltas:
            assert base32 is not None
            inputs.append(_delta_rows(plan, m, j, name, raws, r0, r1, cshape, base32))
        else:
            inputs.append(_full_rows(plan, m, j, name, raws, r0, r1, cshape, base32))
    densities = cfg.densities()
    if cuts is not None:  # TIES: trimmed here by the whole-tensor cut, so the method's own trim is off
        for d, cut in zip(inputs, cuts, strict=True):
            cut.apply(d, BUFFERS.get("cut", d.numel()))
        densities = [1.0] * len(inputs)
    count = (r1 - r0) * row
    ctx = TensorContext(
        name=name,
        tensors=inputs,
        weights=cfg.weights(),
        densities=densities,
        params=cfg.method_params(),
        seed=cfg.seed,
        generators=generators,
        draws=draws,
        scratch=lambda key: BUFFERS.get(("scratch", key), count).view(cshape),
    )
    merged = spec.merge(ctx)
    del inputs, ctx
    if spec.uses_deltas:
        assert base32 is not None
        merged = merged.add_(base32)
    return merged
