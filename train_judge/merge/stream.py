"""Merge one output tensor, a chunk of rows at a time where the method allows it.

``merge_tensor(plan, info)`` yields the merged tensor ``info.name`` as consecutive flat pieces in the
output dtype, which the engine appends to the shard as they come. For element-wise methods (linear,
task arithmetic, DARE-linear, DARE-TIES: ``MethodSpec.elementwise``) a piece is about ``CHUNK``
elements (whole rows): each input's rows are read into a reused buffer (positioned reads, on a
worker thread one chunk ahead), converted to float32, merged and cast back while still in the CPU
cache. DARE's masks come from one generator per (tensor, model) drawn in element order, so chunks
give the same masks as one whole draw. TIES goes in two passes: each model's cut-off magnitude over
the whole tensor (``trim.MagnitudeCut``), then chunks trimmed by it in element order, so ties at the
cut-off are kept by position as a whole-tensor trim would. SLERP: float64 sums of the dot product
and norms over chunks, then ``c_a a + c_b b`` by chunks. With numba, full checkpoints go through
``fused`` (one kernel per chunk, the same bytes; SLERP's sums there too). Tensors no LoRA expert touches are the base, copied
bit for bit; non-float tensors come from the reference model.

Example (flat row ranges of a 5 x 3 tensor in chunks of 2 rows):
    >>> list(row_chunks((5, 3), 6))
    [(0, 2), (2, 4), (4, 5)]
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

import numpy as np
import torch

from .philox import philox_key, uniform_job
from .methods import TensorContext
from .plan import Plan
from .safetensors_io import DTYPES, TensorInfo
from .sources import Checkpoint, LoraAdapter, Source
from .trim import MagnitudeCut

CHUNK = 1 << 20
"""Target elements per piece for element-wise methods (4 MB per float32 buffer)."""

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Worker threads that read the next chunk (positioned reads) and draw DARE's random numbers while
    the caller's thread computes the current one (torch and ``os.preadv`` release the GIL)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=3, thread_name_prefix="merge-prefetch")
        return _POOL


SPLIT = 1 << 16
"""The numba path computes chunks of at least this many elements in two halves, on two threads."""
_HALF: ThreadPoolExecutor | None = None


def half_pool() -> ThreadPoolExecutor:
    """The thread that computes a chunk's second half (not the readers': a read queued ahead of it
    would stall the chunk)."""
    global _HALF
    with _POOL_LOCK:
        if _HALF is None:
            _HALF = ThreadPoolExecutor(max_workers=1, thread_name_prefix="merge-half")
        return _HALF


class Buffers:
    """Chunk-sized tensors kept between chunks and tensors, by key (fresh memory costs a page fault per
    4 KB, more than the arithmetic on it). ``get(key, n, dtype)`` is a tensor of ``n`` elements."""

    def __init__(self) -> None:
        self._bufs: dict[Any, torch.Tensor] = {}

    def get(self, key: Any, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        buf = self._bufs.get((key, dtype))
        if buf is None or buf.numel() < n:
            buf = self._bufs[(key, dtype)] = torch.empty(max(n, CHUNK), dtype=dtype)
        return buf[:n]

    def clear(self) -> None:
        self._bufs.clear()


BUFFERS = Buffers()
"""The buffers of the merge under way (cleared by the engine after each merge)."""


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


def _prefetched(chunks: list[tuple[int, int]], jobs: Callable[[int, int, int], list[Callable[[], Any]]],
                ) -> Iterator[tuple[int, int, int, list[Any]]]:
    """``(slot, r0, r1, results)`` per chunk: the results of ``jobs(slot, r0, r1)`` (callables run on
    the worker threads, each chunk's while the previous one is processed; ``slot`` alternates 0 / 1,
    so a job filling slot-keyed buffers never overwrites the chunk being processed)."""
    pool = _pool()

    def submit(i: int) -> list[Future]:
        r0, r1 = chunks[i]
        return [pool.submit(job) for job in jobs(i % 2, r0, r1)]

    pending = submit(0) if chunks else []
    try:
        for i, (r0, r1) in enumerate(chunks):
            results = [f.result() for f in pending]
            pending = submit(i + 1) if i + 1 < len(chunks) else []
            yield i % 2, r0, r1, results
    finally:  # stopped early: let in-flight reads finish before the caller closes the files
        for f in pending:
            f.exception()


def merge_tensor(plan: Plan, info: TensorInfo) -> Iterator[torch.Tensor]:
    """The merged tensor ``info.name`` in the output dtype, as consecutive flat pieces (each valid until
    the next one is asked for: they may live in reused buffers)."""
    cfg, spec, name = plan.config, plan.config.spec, info.name
    ref_info = plan.reference.infos[name]
    out_dtype = DTYPES[info.dtype]
    shape, n = ref_info.shape, ref_info.numel
    if n == 0:
        yield torch.empty(0, dtype=out_dtype)
        return
    row = n // (shape[0] if shape else 1)
    if not ref_info.is_float:
        yield from _copy(plan.reference, name, shape, row, out_dtype)
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
            yield from _copy(base, name, shape, row, out_dtype)
            return
    from . import fused  # the numba kernels' path (it imports this module)
    if scale is None and fused.applies(plan, name, base, out_dtype):
        yield from fused.merge(plan, name, base, shape, row, out_dtype)
        return
    trims = getattr(spec.merge, "sparsify", None) == "magnitude"  # TIES: cut-offs first, then by chunks
    cuts = _magnitude_cuts(plan, name, base, shape, row) if scale is None and trims else None
    if spec.name == "slerp" and scale is None:  # two passes: <a, b>, |a|, |b| over chunks, then c_a a + c_b b
        yield from _slerp(plan, name, base, shape, row, out_dtype)
        return
    chunked = spec.elementwise or scale is not None or cuts is not None
    chunks = list(row_chunks(shape, CHUNK)) if chunked else [(0, shape[0] if shape else 1)]
    generators: dict[int, torch.Generator] = {}
    ctx0 = TensorContext(name=name, tensors=[], weights=cfg.weights(), densities=cfg.densities(),
                         params=cfg.method_params(), seed=cfg.seed, generators=generators)
    random = getattr(spec.merge, "sparsify", None) == "random" and scale is None
    densities = cfg.densities()
    checkpoints = [(j, m) for j, m in enumerate([base, *plan.models]) if isinstance(m, Checkpoint)]

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row
        out: list[Callable[[], Any]] = [lambda: [
            m.read_range(name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[m.infos[name].dtype]))
            for j, m in checkpoints]]
        if random:  # each model's draws, in element order (one chunk at a time per generator), or Philox's
            for i, k in enumerate(densities):
                if k is not None and k < 1.0:
                    out.append(uniform_job(cfg.rng, ctx0.generator(i), philox_key(cfg.seed, name, i),
                                           BUFFERS.get(("draws", slot, i), count), start))
        return out

    for slot, r0, r1, results in _prefetched(chunks, jobs):
        raws: dict[int, torch.Tensor] = dict(zip([j for j, _ in checkpoints], results[0]))
        draws = None
        if random:
            it = iter(results[1:])
            draws = [next(it) if k is not None and k < 1.0 else None for k in densities]
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        merged = _merge_rows(plan, name, base, raws, r0, r1, row, cshape, scale, generators, cuts, draws)
        yield _piece(merged.reshape(-1), out_dtype, slot)


def _piece(t: torch.Tensor, dtype: torch.dtype, slot: int) -> torch.Tensor:
    """``t`` in ``dtype`` (the same values as ``t.to(dtype)``) in the output buffer of ``slot``: a piece
    stays unchanged while the next one is computed, so the writer may write it meanwhile."""
    return BUFFERS.get(("piece", slot), t.numel(), dtype).copy_(t)


def _copy(src: Checkpoint, name: str, shape: tuple[int, ...], row: int, out_dtype: torch.dtype) -> Iterator[torch.Tensor]:
    """``src``'s tensor ``name`` cast to ``out_dtype`` (bit for bit when it is the stored dtype), by chunks."""
    dtype = DTYPES[src.infos[name].dtype]

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row
        return [lambda: src.read_range(name, start, count, BUFFERS.get(("raw", slot, 0), count, dtype))]

    for slot, _, _, (raw,) in _prefetched(list(row_chunks(shape, CHUNK)), jobs):
        yield _piece(raw, out_dtype, slot)


def _f32(key: Any, raw: torch.Tensor, cshape: tuple[int, ...]) -> torch.Tensor:
    """``raw`` as float32 in shape ``cshape``: converted into a reused buffer (``raw`` itself if float32)."""
    if raw.dtype == torch.float32:
        return raw.view(cshape)
    return BUFFERS.get(key, raw.numel()).copy_(raw).view(cshape)


def _full_rows(plan: Plan, m: Source, j: int, name: str, raws: dict[int, torch.Tensor], r0: int, r1: int,
               cshape: tuple[int, ...], base32: torch.Tensor | None) -> torch.Tensor:
    """Model ``m`` (input ``j``)'s full tensor on rows ``r0:r1`` (float32; a LoRA expert is base + delta)."""
    if isinstance(m, LoraAdapter):
        assert base32 is not None  # make_plan requires a base with LoRA experts
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return base32 + d if d is not None else base32
    return _f32(("in", j), raws[j], cshape)


def _delta_rows(plan: Plan, m: Source, j: int, name: str, raws: dict[int, torch.Tensor], r0: int, r1: int,
                cshape: tuple[int, ...], base32: torch.Tensor) -> torch.Tensor:
    """Model ``m`` (input ``j``)'s task vector on rows ``r0:r1`` (float32, a tensor the caller may overwrite)."""
    if isinstance(m, LoraAdapter):
        d = m.delta_rows(name, r0, r1, base32) if base32.dim() else m.delta(name, base32)
        return d if d is not None else torch.zeros_like(base32)
    # convert, then subtract in place: a mixed-dtype torch.sub takes a slow, unvectorized path (~20x)
    return _f32(("in", j), raws[j], cshape).sub_(base32)


def _read_all(plan: Plan, name: str, base: Checkpoint | None, slot: int, r0: int, r1: int,
              row: int) -> dict[int, torch.Tensor]:
    """Rows ``r0:r1`` of every checkpoint input (0: the base, j: model j - 1), stored dtype, slot buffers."""
    start, count = r0 * row, (r1 - r0) * row
    return {j: m.read_range(name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[m.infos[name].dtype]))
            for j, m in enumerate([base, *plan.models]) if isinstance(m, Checkpoint)}


def _slerp(plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int,
           out_dtype: torch.dtype) -> Iterator[torch.Tensor]:
    """SLERP a chunk at a time: float64 sums of the dot product and squared norms first, then the pieces."""
    from .slerp import slerp_coefficients, t_for

    chunks = list(row_chunks(shape, CHUNK))

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        return [lambda: _read_all(plan, name, base, slot, r0, r1, row)]

    def pair(raws: dict[int, torch.Tensor], r0: int, r1: int) -> tuple[torch.Tensor, torch.Tensor]:
        cshape = (r1 - r0, *shape[1:]) if shape else ()
        base32 = _f32(("in", 0), raws[0], cshape) if base is not None else None
        a, b = (_full_rows(plan, m, j, name, raws, r0, r1, cshape, base32) for j, m in enumerate(plan.models, 1))
        return a.reshape(-1), b.reshape(-1)

    dot = aa = bb = 0.0
    for _, r0, r1, (raws,) in _prefetched(chunks, jobs):
        a, b = pair(raws, r0, r1)
        dot += float(torch.dot(a, b))
        aa += float(torch.dot(a, a))
        bb += float(torch.dot(b, b))
    ca, cb = slerp_coefficients(dot, math.sqrt(aa), math.sqrt(bb), t_for(name, plan.config.method_params()))
    for slot, r0, r1, (raws,) in _prefetched(chunks, jobs):
        a, b = pair(raws, r0, r1)
        yield _piece(torch.mul(a, ca, out=BUFFERS.get("out", a.numel())).add_(b, alpha=cb), out_dtype, slot)


def _magnitude_cuts(plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...],
                    row: int) -> list[MagnitudeCut]:
    """First pass of TIES: each model's cut-off magnitude over the whole tensor, from one float32 buffer
    of ``|delta|`` filled a chunk at a time (the only tensor-sized buffer a TIES merge holds), with a
    histogram of its high 16 bits gathered on the way (``MagnitudeCut.measure``)."""
    assert base is not None
    n = math.prod(shape)
    mag = BUFFERS.get("mag", n)  # kept for the next tensors: page faults on a fresh one cost more than the rest
    chunks = list(row_chunks(shape, CHUNK))
    cuts = []
    for i, (m, density) in enumerate(zip(plan.models, plan.config.densities())):
        k = density if density is not None else 1.0
        if k >= 1.0:
            cuts.append(MagnitudeCut(-1.0, 0))
            continue
        hist = torch.zeros(1 << 15, dtype=torch.int64)

        def jobs(slot: int, r0: int, r1: int, m: Source = m) -> list[Callable[[], Any]]:
            start, count = r0 * row, (r1 - r0) * row
            srcs = [(0, base)] + ([(1, m)] if isinstance(m, Checkpoint) else [])
            return [lambda: {j: s.read_range(name, start, count,
                                             BUFFERS.get(("raw", slot, j), count, DTYPES[s.infos[name].dtype]))
                             for j, s in srcs}]

        for _, r0, r1, (raws,) in _prefetched(chunks, jobs):
            cshape = (r1 - r0, *shape[1:]) if shape else ()
            start, count = r0 * row, (r1 - r0) * row
            base32 = _f32(("in", 0), raws[0], cshape)
            raws_m = {i + 1: raws[1]} if 1 in raws else {}
            part = mag[start:start + count]
            torch.abs(_delta_rows(plan, m, i + 1, name, raws_m, r0, r1, cshape, base32).view(-1), out=part)
            hist += torch.bincount(torch.bitwise_right_shift(part.view(torch.int32), 16,
                                                             out=BUFFERS.get("cut", count).view(torch.int32)),
                                   minlength=1 << 15)
        cuts.append(MagnitudeCut.measure(mag, k, hist))
    return cuts


def _merge_rows(plan: Plan, name: str, base: Checkpoint | None, raws: dict[int, torch.Tensor], r0: int, r1: int,
                row: int, cshape: tuple[int, ...], scale: float | None, generators: dict[int, torch.Generator],
                cuts: list[MagnitudeCut] | None = None, draws: list[torch.Tensor | None] | None = None) -> torch.Tensor:
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
        for d, cut in zip(inputs, cuts):
            cut.apply(d, BUFFERS.get("cut", d.numel()))
        densities = [1.0] * len(inputs)
    count = (r1 - r0) * row
    ctx = TensorContext(name=name, tensors=inputs, weights=cfg.weights(), densities=densities,
                        params=cfg.method_params(), seed=cfg.seed, generators=generators, draws=draws,
                        scratch=lambda key: BUFFERS.get(("scratch", key), count).view(cshape))
    merged = spec.merge(ctx)
    del inputs, ctx
    if spec.uses_deltas:
        assert base32 is not None
        merged = merged.add_(base32)
    return merged
