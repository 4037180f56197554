"""The merge of one float tensor: each chunk merged by one fused numba kernel (``kernels``).

``merge`` yields the merged tensor as consecutive pieces in the output dtype. Every input's rows are
read (a worker thread, one chunk ahead) into the rows of one buffer, DARE's draws made there too
(``mt19937``: torch's numbers, ~10x faster than torch draws them), and ``kernels.combine`` (linear,
task arithmetic, DARE-linear) or ``kernels.consensus`` (TIES, DARE-TIES) write the output dtype
straight into the piece (bf16 or float32; others through a float32 buffer), a large chunk in two
halves on two threads (``_halves``).

The rows are the stored bytes when every input is a full checkpoint of one dtype, bf16, float16 or
float32 (float16 widened to float32 by torch, exactly). Otherwise (LoRA experts, mixed or other
dtypes: ``_f32_rows``) they are float32 rows made by torch: each input converted, a LoRA expert's
rows ``base + delta W`` for the full-model methods (linear, SLERP) or, for the task-vector methods,
each model's delta (a LoRA expert's ``delta W``) over a zero row 0 (so the kernels' ``model - base``
is the delta, exactly) with the base in a last row that the kernels add back (``plus``).

TIES of several chunks goes in one pass over its inputs where it can (``ties_pass``: merge with a
window's edge as each cut-off, then merge again the elements inside the windows); otherwise, and as
that path's fallback, in two passes: each model's cut-off magnitude first (``ties_cuts.cuts``: one
pass gathering histograms of ``|delta|`` and a window of candidates), then the merge. So TIES reads
its inputs twice, and only once where all the inputs of a tensor fit in as many bytes as the largest
input tensor: the first pass then reads them into one kept buffer, which the second pass uses.
Peak memory: that buffer and the gathered window, never a float32 copy of a whole tensor.

SLERP (``_slerp``) takes its sums of <a, b>, |a|^2, |b|^2 from ``torch.dot`` on float32 chunks
(64-byte aligned: a float32 dot's summation order is MKL's and cannot be repeated in a kernel; one
ulp of a sum can move c_a, c_b by one float32 ulp), then writes ``c_a a + c_b b`` with
``kernels.slerp_out``. Its inputs stay in the kept buffer when both fit in the largest tensor's
bytes, as TIES's do, so the second pass reads nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import torch

from . import chunking, kernels, ties_cuts, ties_pass
from .chunking import BUFFERS, half_pool, prefetched, row_chunks
from .methods import seed_for
from .mt19937 import MT19937
from .plan import Plan
from .safetensors_io import DTYPES
from .slerp import slerp_coefficients, t_for
from .sources import Checkpoint
from .trim import keep_count

SPARSIFY = {"none": 0, "magnitude": 1, "random": 2}
"""A method's ``sparsify`` as the kernels' code: 0 none, 1 TIES trim, 2 DARE drop."""
_KERNEL_OUT = (torch.bfloat16, torch.float32)
"""Output dtypes the kernels write directly (others: float32, then cast)."""


def _inputs(plan: Plan, base: Checkpoint | None, name: str) -> list[Checkpoint] | None:
    """The checkpoints whose stored rows the kernels read (the base first when the method merges
    deltas, then the models), or None when the rows are made in float32 by ``_f32_rows`` (a LoRA
    expert among the inputs, or dtypes other than one of bf16, float16, float32)."""
    srcs = ([base] if plan.config.spec.uses_deltas else []) + list(plan.models)
    checkpoints = [m for m in srcs if isinstance(m, Checkpoint)]
    dtypes = {m.infos[name].dtype for m in checkpoints}
    if len(checkpoints) < len(srcs) or len(dtypes) != 1 or not dtypes <= {"BF16", "F16", "F32"}:
        return None
    return checkpoints


def _np(t: torch.Tensor) -> np.ndarray:
    """A numpy view of ``t`` (bf16 as its uint16 bits)."""
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


def merge(
    plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int, out_dtype: torch.dtype
) -> Iterator[torch.Tensor]:
    """The merged tensor ``name`` as consecutive flat pieces in ``out_dtype`` (as ``stream.merge_tensor``)."""
    cfg, spec = plan.config, plan.config.spec
    srcs = _inputs(plan, base, name)
    read = _reader(plan, name, base, shape, row, srcs)
    if spec.name == "slerp":
        yield from _slerp(plan, name, shape, row, out_dtype, read, srcs)
        return
    sparsify, consensus = SPARSIFY[spec.sparsify], spec.consensus
    n_models, n = len(plan.models), math.prod(shape)
    in_size = sum(m.infos[name].nbytes for m in srcs) if srcs is not None else math.inf
    params = cfg.method_params()
    lam = float(params.get("lambda", 1.0))
    weights = cfg.weights()
    if spec.name == "linear" and params["normalize"]:
        weights = [w / sum(cfg.weights()) for w in weights]
    elif not consensus:  # a weighted sum: lambda folded into the weights
        weights = [lam * w for w in weights]
    w32 = np.array(weights, np.float32)
    dens = [k if k is not None else 1.0 for k in cfg.densities()]
    d32 = np.array(dens, np.float32)
    mt = sparsify == 2 and any(k < 1.0 for k in dens)
    streams = {i: MT19937(seed_for(cfg.seed, name, i)) for i, k in enumerate(dens) if k < 1.0} if mt else {}
    chunks = list(row_chunks(shape, chunking.CHUNK))
    trims = sparsify == 1 and any(0 < keep_count(k, n) < n for k in dens)
    normalize, lam32 = bool(params.get("normalize", True)), np.float32(lam)
    cache: torch.Tensor | None = None  # (read by the jobs when they run: set below for two-pass TIES)

    def jobs(slot: int, r0: int, r1: int, draws: bool = mt, disk: bool = True) -> list[Callable[[], Any]]:
        count = (r1 - r0) * row
        out: list[Callable[[], Any]] = [lambda: _np(read(slot, r0, r1, cache, disk))]
        if draws:  # MT19937: each model's stream in element order (torch's numbers, see mt19937), a job each
            buf = BUFFERS.get(("draws", slot), n_models * count).view(n_models, count).numpy()
            for i, gen in streams.items():
                out.append(partial(gen.fill, buf[i]))
            out.append(lambda: buf)
        return out

    no_draws = np.empty((n_models, 0), np.float32)
    out_size = n * torch.empty((), dtype=out_dtype).element_size()
    if trims and srcs is not None and len(chunks) > 1 and out_dtype in _KERNEL_OUT and out_size <= _largest(plan):
        full = BUFFERS.get("ties_out", n, out_dtype)  # TIES in one pass (ties_pass), the whole output held
        ks = [keep_count(k, n) for k in dens]
        if ties_pass.one_pass(
            chunks,
            lambda s, a, b: jobs(s, a, b, False),
            row,
            ks,
            ties_cuts.start_thresholds(ks, n),
            w32,
            normalize,
            lam32,
            _np(full),
        ):
            yield from (full[r0 * row : r1 * row] for r0, r1 in chunks)
            return
    # two-pass TIES: when all inputs fit in as much memory as the largest input tensor, the first pass
    # reads them into one buffer (kept between tensors) and the second reads nothing (only when some
    # model is trimmed: with every density 1 there is no first pass to fill the buffer)
    if trims and srcs is not None and in_size <= _largest(plan):
        cache = BUFFERS.get("ties_rows", len(srcs) * n, DTYPES[srcs[0].infos[name].dtype])
    thr, ties = np.full(n_models, -1.0, np.float32), np.zeros(n_models, np.int64)
    if sparsify == 1:  # (thresholds -1 / inf where a density keeps all / nothing)
        thr, ties = ties_cuts.cuts(chunks, jobs, n_models, dens, n, row, cache is not None)
    for slot, r0, r1, results in prefetched(chunks, lambda s, a, b: jobs(s, a, b, mt, cache is None)):
        raws, count = results[0], (r1 - r0) * row
        plus = raws[-1] if srcs is None and spec.uses_deltas else raws[0]  # what the kernels add back: the base
        draws = results[-1] if mt else no_draws
        piece = BUFFERS.get(("piece", slot), count, out_dtype)
        out = piece if out_dtype in _KERNEL_OUT else BUFFERS.get(("out32", slot), count)
        o = _np(out)

        # (the chunk's arrays bound as defaults: these callables must never see the next chunk's)
        def run(
            t: np.ndarray,
            lo: int,
            hi: int,
            raws: np.ndarray = raws,
            plus: np.ndarray = plus,
            draws: np.ndarray = draws,
            o: np.ndarray = o,
        ) -> None:
            if consensus:
                kernels.consensus(raws, plus, w32, sparsify, d32, thr, t, draws, normalize, lam32, o, lo, hi)
            else:
                kernels.combine(raws, spec.uses_deltas, plus, sparsify, w32, d32, draws, o, lo, hi)

        def count_ties(lo: int, hi: int, eq: np.ndarray, raws: np.ndarray = raws) -> None:
            kernels.count_ties(raws, thr, ties, lo, hi, eq)

        _halves(run, count_ties if consensus else None, count, ties)
        yield piece.copy_(out) if out is not piece else piece


def _halves(
    run: Callable[[np.ndarray, int, int], None],
    count_ties: Callable[[int, int, np.ndarray], None] | None,
    n: int,
    ties: np.ndarray,
) -> None:
    """``run(ties, lo, hi)`` over elements ``0 .. n - 1`` of a chunk: the second half on the half thread
    (``chunking.half_pool``) when ``n`` is at least ``chunking.SPLIT``. TIES keeps the first ``ties[m]`` ties in
    element order, so the second half starts from what the first leaves: ``ties`` minus the first
    half's ties (``count_ties``, counted on the worker)."""
    if n < chunking.SPLIT:
        run(ties, 0, n)
        return
    h = n // 2 // kernels.BLOCK * kernels.BLOCK

    def second() -> np.ndarray:
        rest = ties.copy()
        if count_ties is not None and (ties > 0).any():
            eq = np.zeros_like(ties)
            count_ties(0, h, eq)
            rest = np.maximum(ties - eq, 0)
        run(rest, h, n)
        return rest

    job = half_pool().submit(second)
    run(ties.copy(), 0, h)
    ties[:] = job.result()


def _slerp(
    plan: Plan,
    name: str,
    shape: tuple[int, ...],
    row: int,
    out_dtype: torch.dtype,
    read: Read,
    srcs: list[Checkpoint] | None,
) -> Iterator[torch.Tensor]:
    """SLERP: the sums of <a, b>, |a|^2, |b|^2 by ``torch.dot`` on float32 chunks (64-byte aligned: MKL's
    summation order may depend on it), then ``kernels.slerp_out`` per chunk; the rows stay in the kept
    buffer when both inputs fit in the largest tensor's bytes."""
    n = math.prod(shape)
    chunks = list(row_chunks(shape, chunking.CHUNK))
    cache = None
    if srcs is not None and sum(m.infos[name].nbytes for m in srcs) <= _largest(plan):
        cache = BUFFERS.get("ties_rows", 2 * n, DTYPES[srcs[0].infos[name].dtype])

    def jobs(slot: int, r0: int, r1: int, disk: bool = True) -> list[Callable[[], Any]]:
        return [lambda: read(slot, r0, r1, cache, disk)]

    def f32(j: int, raw: torch.Tensor) -> torch.Tensor:  # float32 in an aligned buffer
        if raw.dtype == torch.float32 and raw.data_ptr() % 64 == 0:
            return raw
        return BUFFERS.get(("in", j), raw.numel()).copy_(raw)

    dot = aa = bb = 0.0
    for _, _, _, (rows,) in prefetched(chunks, jobs):
        a, b = f32(1, rows[0]), f32(2, rows[1])
        dot += float(torch.dot(a, b))
        aa += float(torch.dot(a, a))
        bb += float(torch.dot(b, b))
    ca, cb = slerp_coefficients(dot, math.sqrt(aa), math.sqrt(bb), t_for(name, plan.config.method_params()))
    for slot, r0, r1, (rows,) in prefetched(chunks, lambda s, a, b: jobs(s, a, b, cache is None)):
        piece = BUFFERS.get(("piece", slot), (r1 - r0) * row, out_dtype)
        out = piece if out_dtype in _KERNEL_OUT else BUFFERS.get(("out32", slot), piece.numel())
        kernels.slerp_out(_np(rows), np.float32(ca), np.float32(cb), _np(out))
        yield piece.copy_(out) if out is not piece else piece


Read = Callable[[int, int, int, "torch.Tensor | None", bool], torch.Tensor]
"""``read(slot, r0, r1, cache, disk)``: rows ``r0:r1`` of every input as the rows of one buffer."""


def _reader(
    plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int, srcs: list[Checkpoint] | None
) -> Read:
    """How tensor ``name``'s rows are read: the stored rows of ``srcs`` (``_read_rows``), else ``_f32_rows``."""
    if srcs is None:
        return partial(_f32_rows, plan, name, base, shape, row)
    dtype = DTYPES[srcs[0].infos[name].dtype]
    return lambda slot, r0, r1, cache, disk: _read_rows(srcs, name, dtype, cache, slot, r0 * row, (r1 - r0) * row, disk)


def _read_rows(
    srcs: list[Checkpoint],
    name: str,
    dtype: torch.dtype,
    cache: torch.Tensor | None,
    slot: int,
    start: int,
    count: int,
    disk: bool = True,
) -> torch.Tensor:
    """Elements ``start .. start + count`` of tensor ``name`` of every input, as the rows of one
    (inputs, count) buffer: the slot's reused buffer, or that span of the kept ``cache``; ``disk``
    false: the rows are already in the cache. float16 is widened to float32 (exactly, by torch):
    the kernels take bf16 bits or float32."""
    k = len(srcs)
    rows = (
        cache[k * start : k * (start + count)] if cache is not None else BUFFERS.get(("rows", slot), k * count, dtype)
    ).view(k, count)
    for j, src in enumerate(srcs if disk else []):
        src.read_range(name, start, count, rows[j])
    if dtype == torch.float16:
        rows = BUFFERS.get(("rows32", slot), k * count).view(k, count).copy_(rows)
    return rows


def _f32_rows(
    plan: Plan,
    name: str,
    base: Checkpoint | None,
    shape: tuple[int, ...],
    row: int,
    slot: int,
    r0: int,
    r1: int,
    cache: torch.Tensor | None = None,
    disk: bool = True,
) -> torch.Tensor:
    """Rows ``r0:r1`` of every input as float32 rows of one buffer, made by torch (no ``cache``): the
    models (linear, SLERP; a LoRA expert is ``base + delta W``), or, for the task-vector methods, a
    zero row, each model's delta (a LoRA expert's ``delta W``, a checkpoint's ``model - base``), and
    the base last (``plus``)."""
    start, count = r0 * row, (r1 - r0) * row
    cshape = (r1 - r0, *shape[1:]) if shape else ()
    deltas = int(plan.config.spec.uses_deltas)
    rows = BUFFERS.get(("f32rows", slot), (len(plan.models) + 2 * deltas) * count).view(-1, count)
    base32 = _widened(base, name, slot, 0, start, count) if base is not None else None
    if deltas:
        assert base32 is not None
        rows[0].zero_()
        rows[-1].copy_(base32)
    for i, m in enumerate(plan.models):
        r = rows[deltas + i]
        if isinstance(m, Checkpoint):
            x = _widened(m, name, slot, i + 1, start, count)
            if deltas:
                assert base32 is not None
                torch.sub(x, base32, out=r)
            else:
                r.copy_(x)
            continue
        assert base32 is not None  # make_plan requires a base with LoRA experts
        b = base32.view(cshape)
        d = m.delta_rows(name, r0, r1, b) if b.dim() else m.delta(name, b)
        if d is None and deltas:
            r.zero_()
        elif d is None:
            r.copy_(base32)
        elif deltas:
            r.copy_(d.reshape(-1))
        else:
            torch.add(b, d, out=r.view(cshape))
    return rows


def _widened(src: Checkpoint, name: str, slot: int, j: int, start: int, count: int) -> torch.Tensor:
    """Elements ``start .. start + count`` of ``src``'s tensor ``name`` as float32 (a reused buffer)."""
    raw = src.read_range(name, start, count, BUFFERS.get(("raw", slot, j), count, DTYPES[src.infos[name].dtype]))
    return raw if raw.dtype == torch.float32 else BUFFERS.get(("in32", slot, j), count).copy_(raw)


def _largest(plan: Plan) -> int:
    """Bytes of the largest tensor of the reference model (the unit of the memory target)."""
    return max(i.nbytes for i in plan.reference.infos.values())
