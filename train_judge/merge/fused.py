"""The numba path of ``stream.merge_tensor``: each chunk merged by one fused kernel (``kernels``).

``applies(plan, name, base)`` says whether tensor ``name`` goes this way: the numba path is selected
(``path()``, from ``PROM_MERGE_KERNELS``), the method is linear, task_arithmetic, dare_linear, ties,
dare_ties or slerp, every input is a full checkpoint (LoRA experts keep the torch path), all inputs
share one stored dtype (bf16, float16 or float32) and the output is bf16, float16 or float32. ``merge`` then yields the
same pieces, bit for bit, as the torch path: every input's rows are read (a worker thread, one chunk
ahead) into the rows of one buffer, MT19937 draws made there too (``mt19937``: torch's numbers, ~10x
faster than torch draws them; or Philox drawn in the kernel), and ``kernels.combine`` /
``kernels.consensus`` write the output dtype straight into the piece, a large chunk in two halves on
two threads (``_halves``).

TIES of several chunks goes in one pass over its inputs where it can (``ties_pass``: merge with a
window's edge as each cut-off, then merge again the elements inside the windows); otherwise, and as
that path's fallback, in two passes: each model's cut-off magnitude first (``ties_cuts.cuts``: one
pass gathering histograms of ``|delta|`` and a window of candidates), then the merge. So TIES reads
its inputs twice (the torch path: once per model, with the base, then once more), and only once
where all the inputs of a tensor fit in as many bytes as the largest input tensor: the first pass
then reads them into one kept buffer, which the second pass uses. Peak memory: that buffer and the
gathered window, not the torch path's float32 ``|delta|`` of the whole tensor.

SLERP (``_slerp``) takes its sums of <a, b>, |a|^2, |b|^2 from the same ``torch.dot`` calls as the
torch path, on the same float32 chunks (a float32 dot's summation order is MKL's and cannot be
repeated in a kernel; one ulp of a sum can move c_a, c_b by one float32 ulp), then writes
``c_a a + c_b b`` with ``kernels.slerp_out``. Its inputs stay in the kept buffer when both fit in the
largest tensor's bytes, as TIES's do, so the second pass reads nothing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import torch

from prom_reward.errors import ConfigError

from . import chunking, kernels, ties_cuts, ties_pass
from .chunking import BUFFERS, half_pool, prefetched, row_chunks
from .methods import seed_for
from .mt19937 import MT19937
from .plan import Plan
from .safetensors_io import DTYPES
from .slerp import slerp_coefficients, t_for
from .sources import Checkpoint
from .trim import keep_count

ENV = "PROM_MERGE_KERNELS"
PATHS = ("numba", "torch")
METHODS = {
    "linear": (0, False),
    "task_arithmetic": (0, False),
    "dare_linear": (2, False),
    "ties": (1, True),
    "dare_ties": (2, True),
}
"""method -> (sparsify: 0 none, 1 TIES trim, 2 DARE drop; sign consensus)."""


def path() -> str:
    """The kernel path in use: ``PROM_MERGE_KERNELS`` (numba / torch), else numba when installed."""
    v = os.environ.get(ENV, "").strip().lower()
    if v in ("", "auto"):
        return "numba" if kernels.HAVE_NUMBA else "torch"
    if v not in PATHS:
        raise ConfigError(f"{ENV}: expected one of {', '.join(PATHS)} (unset: numba when installed), got {v!r}")
    if v == "numba" and not kernels.HAVE_NUMBA:
        raise ConfigError(f"{ENV}=numba but numba is not installed (pip install numba), or unset it")
    return v


def applies(plan: Plan, name: str, base: Checkpoint | None, out_dtype: torch.dtype) -> bool:
    """True when tensor ``name`` can be merged by the kernels (see the module doc)."""
    spec = plan.config.spec
    if spec.name not in METHODS and spec.name != "slerp":
        return False
    if out_dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return False
    srcs = _inputs(plan, base)
    if srcs is None or path() != "numba":
        return False
    dtypes = {m.infos[name].dtype for m in srcs}
    return len(dtypes) == 1 and dtypes <= {"BF16", "F16", "F32"}


def _inputs(plan: Plan, base: Checkpoint | None) -> list[Checkpoint] | None:
    """What the kernels read (the base first when the method merges deltas, then the models), or None when
    one of them is not a full checkpoint."""
    srcs = ([base] if plan.config.spec.uses_deltas else []) + list(plan.models)
    checkpoints = [m for m in srcs if isinstance(m, Checkpoint)]
    return checkpoints if len(checkpoints) == len(srcs) else None


def _np(t: torch.Tensor) -> np.ndarray:
    """A numpy view of ``t`` (bf16 as its uint16 bits)."""
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


def merge(
    plan: Plan, name: str, base: Checkpoint | None, shape: tuple[int, ...], row: int, out_dtype: torch.dtype
) -> Iterator[torch.Tensor]:
    """The merged tensor ``name`` as consecutive flat pieces in ``out_dtype`` (as ``stream.merge_tensor``)."""
    cfg, spec = plan.config, plan.config.spec
    if spec.name == "slerp":
        yield from _slerp(plan, name, shape, row, out_dtype)
        return
    sparsify, consensus = METHODS[spec.name]
    srcs = _inputs(plan, base)
    assert srcs is not None  # (applies() said so)
    dtype = DTYPES[srcs[0].infos[name].dtype]
    n_in, n_models, n = len(srcs), len(plan.models), math.prod(shape)
    params = cfg.method_params()
    lam = float(params.get("lambda", 1.0))
    weights = cfg.weights()
    if spec.name == "linear" and params["normalize"]:
        weights = [w / sum(cfg.weights()) for w in weights]
    elif not consensus:  # a weighted sum: lambda folded into the weights, as the torch path does
        weights = [lam * w for w in weights]
    w32 = np.array(weights, np.float32)
    dens = [k if k is not None else 1.0 for k in cfg.densities()]
    d32 = np.array(dens, np.float32)
    philox = cfg.rng == "philox"
    mt = sparsify == 2 and not philox and any(k < 1.0 for k in dens)
    keys = np.array([kernels.philox_key(cfg.seed, name, i) for i in range(n_models)], np.uint32).reshape(-1, 2)
    streams = {i: MT19937(seed_for(cfg.seed, name, i)) for i, k in enumerate(dens) if k < 1.0} if mt else {}
    chunks = list(row_chunks(shape, chunking.CHUNK))
    trims = sparsify == 1 and any(0 < keep_count(k, n) < n for k in dens)
    normalize, lam32 = bool(params.get("normalize", True)), np.float32(lam)
    cache: torch.Tensor | None = None  # (read by the jobs when they run: set below for two-pass TIES)

    def jobs(slot: int, r0: int, r1: int, draws: bool = mt, disk: bool = True) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row

        out: list[Callable[[], Any]] = [lambda: _np(_read_rows(srcs, name, dtype, cache, slot, start, count, disk))]
        if draws:  # MT19937: each model's stream in element order (torch's numbers, see mt19937), a job each
            buf = BUFFERS.get(("draws", slot), n_models * count).view(n_models, count).numpy()
            for i, gen in streams.items():
                out.append(partial(gen.fill, buf[i]))
            out.append(lambda: buf)
        return out

    no_draws = np.empty((n_models, 0), np.float32)
    out_size = n * torch.empty((), dtype=out_dtype).element_size()
    if trims and len(chunks) > 1 and out_dtype != torch.float16 and out_size <= _largest(plan):
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
    size = n_in * n * torch.empty((), dtype=dtype).element_size()
    cache = BUFFERS.get("ties_rows", n_in * n, dtype) if trims and size <= _largest(plan) else None
    thr, ties = np.full(n_models, -1.0, np.float32), np.zeros(n_models, np.int64)
    if sparsify == 1:  # (thresholds -1 / inf where a density keeps all / nothing)
        thr, ties = ties_cuts.cuts(chunks, jobs, n_models, dens, n, row, cache is not None)
    for slot, r0, r1, results in prefetched(chunks, lambda s, a, b: jobs(s, a, b, mt, cache is None)):
        raws, count = results[0], (r1 - r0) * row
        draws = results[-1] if mt else no_draws
        piece = BUFFERS.get(("piece", slot), count, out_dtype)
        out = BUFFERS.get(("out32", slot), count) if out_dtype == torch.float16 else piece
        o, at = _np(out), r0 * row
        # (the chunk's arrays bound as defaults: these callables must never see the next chunk's)
        if consensus:

            def run(
                t: np.ndarray,
                lo: int,
                hi: int,
                raws: np.ndarray = raws,
                draws: np.ndarray = draws,
                at: int = at,
                o: np.ndarray = o,
            ) -> None:
                kernels.consensus(
                    raws, w32, sparsify, d32, thr, t, draws, keys, int(philox), at, normalize, lam32, o, lo, hi
                )

            def count_ties(lo: int, hi: int, eq: np.ndarray, raws: np.ndarray = raws) -> None:
                kernels.count_ties(raws, thr, ties, lo, hi, eq)

            _halves(run, count_ties, count, ties)
        else:

            def combine(
                t: np.ndarray,
                lo: int,
                hi: int,
                raws: np.ndarray = raws,
                draws: np.ndarray = draws,
                at: int = at,
                o: np.ndarray = o,
            ) -> None:
                kernels.combine(raws, spec.uses_deltas, sparsify, w32, d32, draws, keys, int(philox), at, o, lo, hi)

            _halves(combine, None, count, ties)
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


def _slerp(plan: Plan, name: str, shape: tuple[int, ...], row: int, out_dtype: torch.dtype) -> Iterator[torch.Tensor]:
    """SLERP as ``torch_path._slerp``: the sums of <a, b>, |a|^2, |b|^2 by the same ``torch.dot`` calls on the
    same float32 chunks (64-byte aligned, as there: MKL's summation order may depend on it), then
    ``kernels.slerp_out`` per chunk; the rows stay in the kept buffer when both inputs fit in it."""
    srcs = _inputs(plan, None)
    assert srcs is not None  # (applies() said so)
    dtype, n = DTYPES[srcs[0].infos[name].dtype], math.prod(shape)
    chunks = list(row_chunks(shape, chunking.CHUNK))
    size = 2 * n * torch.empty((), dtype=dtype).element_size()
    cache = BUFFERS.get("ties_rows", 2 * n, dtype) if size <= _largest(plan) else None

    def jobs(slot: int, r0: int, r1: int, disk: bool = True, wide: bool = False) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row

        return [lambda: _read_rows(srcs, name, dtype, cache, slot, start, count, disk, wide)]

    def f32(j: int, raw: torch.Tensor) -> torch.Tensor:  # as torch_path._f32, in an aligned buffer
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
    for slot, r0, r1, (rows,) in prefetched(chunks, lambda s, a, b: jobs(s, a, b, cache is None, True)):
        piece = BUFFERS.get(("piece", slot), (r1 - r0) * row, out_dtype)
        out = BUFFERS.get(("out32", slot), piece.numel()) if out_dtype == torch.float16 else piece
        kernels.slerp_out(_np(rows), np.float32(ca), np.float32(cb), _np(out))
        yield piece.copy_(out) if out is not piece else piece


def _read_rows(
    srcs: list[Checkpoint],
    name: str,
    dtype: torch.dtype,
    cache: torch.Tensor | None,
    slot: int,
    start: int,
    count: int,
    disk: bool = True,
    widen: bool = True,
) -> torch.Tensor:
    """Elements ``start .. start + count`` of tensor ``name`` of every input, as the rows of one
    (inputs, count) buffer: the slot's reused buffer, or that span of the kept ``cache``; ``disk``
    false: the rows are already in the cache. float16 is ``widen``ed to float32 (exactly, by torch):
    the kernels take bf16 bits or float32."""
    k = len(srcs)
    rows = (
        cache[k * start : k * (start + count)] if cache is not None else BUFFERS.get(("rows", slot), k * count, dtype)
    ).view(k, count)
    for j, src in enumerate(srcs if disk else []):
        src.read_range(name, start, count, rows[j])
    if widen and dtype == torch.float16:
        rows = BUFFERS.get(("rows32", slot), k * count).view(k, count).copy_(rows)
    return rows


def _largest(plan: Plan) -> int:
    """Bytes of the largest tensor of the reference model (the unit of the memory target)."""
    return max(i.nbytes for i in plan.reference.infos.values())
