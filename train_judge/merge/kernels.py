"""Fused numba kernels of the merge engine: a chunk's whole computation in one pass over raw buffers.

These kernels are the merge methods' one implementation. They read the input rows (bf16 as
``uint16``, widened by ``bits << 16``, or float32), compute in float32 with the operations and rounding
of the plain-torch formulas (``add_(x, alpha=w)`` is an FMA in torch's vectorized kernels, so here too;
a division stays a division; bf16 output is rounded to nearest even, NaN written as ``0xFFFF`` like
torch's vectorized cast) and write the output dtype directly. Outputs are bit-identical to the
plain-torch reference of each method in ``tests/train_judge/merge/reference.py``
(``tests/train_judge/merge/test_kernels.py``). The work goes in blocks of ``BLOCK`` elements so that
each inner loop is simple enough to vectorize. Kernels are compiled on first use and cached on disk
(``cache=True``); they release the GIL (``nogil=True``), so the engine's reader and writer threads
run beside them.

The kernels and the helpers they inline (``_load``, ``_store``, ``_trim``, ``_drop`` ...) stay in this one
module, over the 400 lines files are held to: numba's on-disk cache checks only the source file of the
function it caches, so a helper moved to another module could change without the kernels compiled with it
being rebuilt (a stale kernel, silently different bytes).

DARE's uniform draws (torch's MT19937 numbers) are made on worker threads (``mt19937.MT19937``) and
passed in. The rows the final add uses (``plus``) are the base's row in ``raws`` for full checkpoints,
a separate float32 row when the rows hold LoRA experts' deltas (``fused``).

Example (bf16 rows 1.0 and 3.0, weights 0.5 each, bf16 out: 2.0):
    >>> out, w = np.zeros(1, np.uint16), np.array([0.5, 0.5], np.float32)
    >>> rows = np.array([[0x3F80], [0x4040]], np.uint16)
    >>> combine(rows, False, rows[0], 0, w, np.ones(2, np.float32), np.zeros((2, 0), np.float32), out, 0, 1)
    >>> hex(int(out[0]))
    '0x4000'
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import mt19937

BLOCK = 4096

_jit = njit(cache=True, nogil=True)


@intrinsic
def _f32(typingctx, bits):  # noqa: ANN001 - an integer's low 32 bits as a float32
    def codegen(context, builder, signature, args):  # noqa: ANN001
        v, i32 = args[0], ir.IntType(32)
        v = builder.trunc(v, i32) if v.type.width > 32 else builder.zext(v, i32) if v.type.width < 32 else v
        return builder.bitcast(v, ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def _u32(typingctx, x):  # noqa: ANN001 - a float32's bits
    def codegen(context, builder, signature, args):  # noqa: ANN001
        return builder.bitcast(args[0], ir.IntType(32))

    return (types.uint32(types.float32), codegen) if x == types.float32 else None


@intrinsic
def _fma(typingctx, a, b, c):  # noqa: ANN001 - a * b + c rounded once (torch's add_(b, alpha=a))
    def codegen(context, builder, signature, args):  # noqa: ANN001
        f = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f, [f, f, f]), "llvm.fma.f32")
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


def _load(a, i):  # noqa: ANN001
    pass


@overload(_load)
def _load_impl(a, i):  # noqa: ANN001
    if a.dtype == types.uint16:
        return lambda a, i: _f32(np.uint32(a[i]) << np.uint32(16))
    return lambda a, i: a[i]


def _store(o, i, v):  # noqa: ANN001
    pass


@overload(_store)
def _store_impl(o, i, v):  # noqa: ANN001
    if o.dtype == types.uint16:

        def bf16(o, i, v):  # noqa: ANN001 - round to nearest even; NaN as torch's vector cast
            b = _u32(v)
            r = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
            o[i] = np.uint16(0xFFFF) if v != v else np.uint16(r)

        return bf16

    def f32(o, i, v):  # noqa: ANN001
        o[i] = v

    return f32


# Loops index from 0 over per-block slices: an index like ``s + t`` keeps LLVM from vectorizing.


@_jit
def _delta(src, b, base, d):  # noqa: ANN001
    """d[:] = src - b as float32 (without the base: src)."""
    if base:
        for t in range(d.shape[0]):
            d[t] = _load(src, t) - _load(b, t)
    else:
        for t in range(d.shape[0]):
            d[t] = _load(src, t)


@_jit
def _trim(d, th, ties, m):  # noqa: ANN001
    """TIES trim of d in place: times 1.0 where |d| > th or among the first ties[m] at th, else 0.0."""
    if th < 0:
        return
    if ties[m] == 0:
        for t in range(d.shape[0]):
            d[t] = d[t] * (np.float32(1.0) if abs(d[t]) > th else np.float32(0.0))
        return
    eq = 0
    for t in range(d.shape[0]):
        eq += abs(d[t]) == th
    if eq <= ties[m]:  # every tie here is kept: a vectorized >=
        ties[m] -= eq
        for t in range(d.shape[0]):
            d[t] = d[t] * (np.float32(1.0) if abs(d[t]) >= th else np.float32(0.0))
        return
    for t in range(d.shape[0]):  # the last ties to keep are here: the first come (element order)
        a = abs(d[t])
        keep = a > th
        if a == th and ties[m] > 0:
            keep = True
            ties[m] -= 1
        d[t] = d[t] * (np.float32(1.0) if keep else np.float32(0.0))


@_jit
def _drop(d, k, u):  # noqa: ANN001
    """DARE on d in place: the bits ANDed with all ones where the draw u < k (else +0.0), then / k."""
    for t in range(d.shape[0]):
        d[t] = _f32(_u32(d[t]) & (np.uint32(0xFFFFFFFF) if u[t] < k else np.uint32(0))) / k


@_jit
def _sparsify(d, m, sparsify, dens, thr, ties, draws, s):  # noqa: ANN001
    """Trim (``sparsify`` 1) or drop (2: with ``draws[m]`` from ``s`` on)."""
    if sparsify == 1:
        _trim(d, thr[m], ties, m)
    elif sparsify == 2 and dens[m] < 1.0:
        _drop(d, dens[m], draws[m, s : s + d.shape[0]])


@_jit
def _accumulate(acc, d, w, first):  # noqa: ANN001
    """``acc = d * w`` (``first``) or ``acc += d * w`` as one FMA, torch's ``add_(d, alpha=w)``."""
    if first:
        for t in range(d.shape[0]):
            acc[t] = d[t] * w
    else:
        for t in range(d.shape[0]):
            acc[t] = _fma(d[t], w, acc[t])


@_jit
def combine(raws, base, plus, sparsify, weights, dens, draws, out, lo, hi):  # noqa: ANN001
    """Weighted sum of elements ``lo .. hi - 1`` of one chunk (linear, task arithmetic, DARE-linear)
    into ``out`` (bf16 bits or f32).

    ``raws``: (inputs, n) raw rows, row 0 the base when ``base`` (subtracted; ``plus`` is added back:
    the base's row, or the base itself where the rows are deltas over a zero row 0); ``weights``:
    float32 per model (lambda folded in); ``sparsify`` 2 drops with DARE where ``dens`` < 1, by
    ``draws`` (models, n). Out: sum_i w_i d_i (+ base)."""
    M = weights.shape[0]
    dbuf, abuf = np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32)
    off = 1 if base else 0
    thr, ties = np.zeros(1, np.float32), np.zeros(1, np.int64)  # no trim here
    for s in range(lo, hi, BLOCK):
        e = min(hi, s + BLOCK)
        d, acc, b = dbuf[: e - s], abuf[: e - s], raws[0, s:e]
        for m in range(M):
            _delta(raws[m + off, s:e], b, base, d)
            _sparsify(d, m, sparsify, dens, thr, ties, draws, s)
            _accumulate(acc, d, weights[m], m == 0)
        o, p = out[s:e], plus[s:e]
        if base:
            for t in range(acc.shape[0]):
                _store(o, t, acc[t] + _load(p, t))
        else:
            for t in range(acc.shape[0]):
                _store(o, t, acc[t])


@_jit
def _pair(d0, d1, w0, w1, normalize, lam, b, o):  # noqa: ANN001
    """``consensus`` of two models on one block (elect, disjoint mean, lambda, + base, store)."""
    tiny, one, zero = np.float32(1e-30), np.float32(1.0), np.float32(0.0)
    for t in range(d0.shape[0]):
        tot = _fma(d1[t], w1, d0[t] * w0)
        e = one if tot > zero else (-one if tot < zero else zero)
        a0 = one if d0[t] * e > zero else zero
        a1 = one if d1[t] * e > zero else zero
        v = _fma(d1[t] * a1, w1, (d0[t] * a0) * w0)
        if normalize:
            den = _fma(a1, w1, _fma(a0, w0, zero))
            v = v / (tiny if den < tiny else den)
        if lam != one:
            v = v * lam
        _store(o, t, v + _load(b, t))


@_jit
def _elect(dbuf, n, weights, normalize, lam, b, o, tot, num, den):  # noqa: ANN001
    """TIES's sign election and disjoint weighted mean of the sparsified deltas ``dbuf[:, :n]`` of one
    block (sum without ``normalize``), times ``lam``, + base ``b``, stored into ``o``."""
    M = weights.shape[0]
    if M == 2:  # the usual case, in one loop: the same operations as below, element by element
        _pair(dbuf[0, :n], dbuf[1, :n], weights[0], weights[1], normalize, lam, b, o)
        return
    tiny, one, zero = np.float32(1e-30), np.float32(1.0), np.float32(0.0)
    tot, num, den = tot[:n], num[:n], den[:n]
    for m in range(M):
        _accumulate(tot, dbuf[m, :n], weights[m], m == 0)
    for t in range(n):
        tot[t] = one if tot[t] > zero else (-one if tot[t] < zero else zero)
    for m in range(M):
        d = dbuf[m, :n]
        w = weights[m]
        if m == 0:
            for t in range(n):
                agree = one if d[t] * tot[t] > zero else zero
                num[t] = (d[t] * agree) * w
                den[t] = _fma(agree, w, zero)
        else:
            for t in range(n):
                agree = one if d[t] * tot[t] > zero else zero
                num[t] = _fma(d[t] * agree, w, num[t])
                den[t] = _fma(agree, w, den[t])
    for t in range(n):
        v = num[t]
        if normalize:
            v = v / (tiny if den[t] < tiny else den[t])
        if lam != one:
            v = v * lam
        _store(o, t, v + _load(b, t))


@_jit
def consensus(raws, plus, weights, sparsify, dens, thr, ties, draws, normalize, lam, out, lo, hi):  # noqa: ANN001
    """TIES / DARE-TIES on elements ``lo .. hi - 1`` of one chunk into ``out``: trim (``sparsify`` 1,
    by ``thr`` / ``ties``, the ties still to keep at the threshold, counted down in element order) or
    drop (2), elect signs, disjoint weighted mean (sum without ``normalize``), times ``lam``, + ``plus``
    (the base: its row ``raws[0]``, or the base itself where the rows are deltas over a zero row 0)."""
    M = weights.shape[0]
    dbuf = np.empty((M, BLOCK), np.float32)
    tbuf, nbuf, ebuf = np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32)
    for s in range(lo, hi, BLOCK):
        e = min(hi, s + BLOCK)
        b = raws[0, s:e]
        for m in range(M):
            d = dbuf[m, : e - s]
            _delta(raws[m + 1, s:e], b, True, d)
            _sparsify(d, m, sparsify, dens, thr, ties, draws, s)
        _elect(dbuf, e - s, weights, normalize, lam, plus[s:e], out[s:e], tbuf, nbuf, ebuf)


@_jit
def consensus_spec(
    raws, weights, edges, normalize, lam, out, lo, hi, need, wlo, whi, start, above, amb_idx, amb_raw, namb
):  # noqa: ANN001
    """One-pass TIES (``ties_pass``) on elements ``lo .. hi - 1`` of one chunk (element ``start`` of
    the tensor first): ``consensus`` with each model's threshold ``edges[m]`` and no ties, and in the
    same pass, per model in ``need``, how many ``|delta|``s have their high 16 bits above ``whi[m]``
    (``above[m] +=``) and, in element order, the tensor index (``amb_idx``) and raw inputs
    (``amb_raw``) of each element whose bin is in some model's window ``wlo[m] .. whi[m]``;
    ``namb[0]`` counts them, also past the capacity."""
    M, n_in, cap = weights.shape[0], raws.shape[0], amb_idx.shape[0]
    dbuf = np.empty((M, BLOCK), np.float32)
    tbuf, nbuf, ebuf = np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32)
    fbuf, pos, no_ties = np.empty(BLOCK, np.uint32), np.empty(BLOCK, np.int64), np.zeros(M, np.int64)
    one, zero = np.float32(1.0), np.float32(0.0)
    c = namb[0]
    for s in range(lo, hi, BLOCK):
        e = min(hi, s + BLOCK)
        b, f = raws[0, s:e], fbuf[: e - s]
        f[:] = 0
        for m in range(M):
            d = dbuf[m, : e - s]
            _delta(raws[m + 1, s:e], b, True, d)
            if not need[m]:
                _trim(d, edges[m], no_ties, m)
                continue
            lo_m, hi_m, th = np.uint32(wlo[m]), np.uint32(whi[m]), edges[m]
            span, up = np.uint32(hi_m - lo_m), np.int64(0)
            for t in range(d.shape[0]):  # bins, counts, window flags and the trim by the window's edge
                a = abs(d[t])
                bn = _u32(a) >> np.uint32(16)
                up += np.int32(bn > hi_m)
                f[t] |= np.uint32(np.uint32(bn - lo_m) <= span)  # in the window: (bn - lo) mod 2**32 <= hi - lo
                d[t] = d[t] * (one if a > th else zero)
            above[m] += up
        _elect(dbuf, e - s, weights, normalize, lam, b, out[s:e], tbuf, nbuf, ebuf)
        k = 0
        for t in range(f.shape[0]):  # the flagged positions, without a branch
            pos[k] = t
            k += f[t]
        for i in range(k):
            if c + i < cap:
                amb_idx[c + i] = start + s + pos[i]
                for j in range(n_in):
                    amb_raw[j, c + i] = raws[j, s + pos[i]]
        c += k
    namb[0] = c


@_jit
def window_counts(raws, m, a, lo, counts):  # noqa: ANN001
    """``counts[b - lo] +=`` one per element ``0 .. a - 1`` whose ``|model m - base|`` has high 16 bits
    ``b`` in ``lo .. lo + len(counts) - 2``; the last entry counts the rest (a branch-free histogram)."""
    dbuf, last = np.empty(BLOCK, np.float32), np.uint32(counts.shape[0] - 1)
    for s in range(0, a, BLOCK):
        e = min(a, s + BLOCK)
        d = dbuf[: e - s]
        _delta(raws[m + 1, s:e], raws[0, s:e], True, d)
        for t in range(d.shape[0]):
            counts[min(np.uint32((_u32(abs(d[t])) >> np.uint32(16)) - np.uint32(lo)), last)] += 1


@_jit
def cut_in_bin(raws, m, a, b, r):  # noqa: ANN001
    """TIES's cut in bin ``b`` (high 16 bits of ``|model m - base|``) over elements ``0 .. a - 1``:
    (the ``r``-th largest magnitude there, ``r`` minus how many there are larger), from counts of the
    low 16 bits (what ``trim.MagnitudeCut.from_bin`` gets by partitioning the bin's entries)."""
    dbuf, low = np.empty(BLOCK, np.float32), np.zeros((1 << 16) + 1, np.int64)
    for s in range(0, a, BLOCK):
        e = min(a, s + BLOCK)
        d = dbuf[: e - s]
        _delta(raws[m + 1, s:e], raws[0, s:e], True, d)
        for t in range(d.shape[0]):
            x = _u32(abs(d[t]))
            low[(x & np.uint32(0xFFFF)) if (x >> np.uint32(16)) == b else np.uint32(1 << 16)] += 1
    larger = 0
    for v in range((1 << 16) - 1, -1, -1):
        if larger + low[v] >= r:
            return _f32((np.uint32(b) << np.uint32(16)) | np.uint32(v)), r - larger
        larger += low[v]
    return np.float32(np.inf), 0  # fewer than r entries in the bin: the caller's counts disagree


@_jit
def scatter(out, idx, vals, a):  # noqa: ANN001
    """``out[idx[i]] = vals[i]`` for ``i < a``."""
    for i in range(a):
        out[idx[i]] = vals[i]


@_jit
def count_ties(raws, thr, ties, lo, hi, eq):  # noqa: ANN001
    """``eq[m]`` = how many of elements ``lo .. hi - 1`` have ``|model m - base| == thr[m]``, for the
    models with ties still to keep (``ties[m] > 0``; others 0): what a trim of that range uses up."""
    dbuf = np.empty(BLOCK, np.float32)
    for m in range(thr.shape[0]):
        eq[m] = 0
        if ties[m] <= 0 or thr[m] < 0:
            continue
        th, c = thr[m], 0
        for s in range(lo, hi, BLOCK):
            e = min(hi, s + BLOCK)
            d = dbuf[: e - s]
            _delta(raws[m + 1, s:e], raws[0, s:e], True, d)
            for t in range(d.shape[0]):
                c += abs(d[t]) == th
        eq[m] = c


@_jit
def slerp_out(raws, ca, cb, out):  # noqa: ANN001
    """SLERP's second pass on one chunk: ``out = cb * b + ca * a`` (torch's ``mul(a, ca).add_(b, alpha=cb)``)."""
    n = out.shape[0]
    for s in range(0, n, BLOCK):
        e = min(n, s + BLOCK)
        a, b, o = raws[0, s:e], raws[1, s:e], out[s:e]
        for t in range(o.shape[0]):
            _store(o, t, _fma(_load(b, t), cb, _load(a, t) * ca))


@_jit
def ties_scan(raws, need, hist, do_hist, lo, hi, cand, ncand):  # noqa: ANN001
    """TIES pass over one chunk, every model at once: the counts of the high 16 bits of
    |model - base| (``hist[m]``, when ``do_hist``) and the |delta|s falling in bins lo[m]..hi[m],
    in element order, into ``cand[m]`` (``ncand[m]`` counts them, also past the capacity)."""
    M, n, cap = need.shape[0], raws.shape[1], cand.shape[1]
    dbuf, bbuf = np.empty(BLOCK, np.float32), np.empty(BLOCK, np.uint32)
    for s in range(0, n, BLOCK):
        e = min(n, s + BLOCK)
        d, bins = dbuf[: e - s], bbuf[: e - s]
        for m in range(M):
            if not need[m]:
                continue
            _delta(raws[m + 1, s:e], raws[0, s:e], True, d)
            h, lo_m, span, c = hist[m], lo[m], hi[m] - lo[m], ncand[m]
            for t in range(d.shape[0]):
                bins[t] = _u32(abs(d[t])) >> np.uint32(16)
            if do_hist:
                for t in range(d.shape[0]):
                    h[bins[t]] += 1
            if span < 0:
                continue
            row = cand[m]
            for t in range(d.shape[0]):
                if np.uint64(np.int64(bins[t]) - lo_m) <= np.uint64(span):
                    if c < cap:
                        row[c] = abs(d[t])
                    c += 1
            ncand[m] = c


def warm_up() -> float:
    """Compile (or load from numba's cache) every kernel for bf16 and float32 inputs and outputs;
    returns the seconds it took (the first call of a kernel pays this otherwise)."""
    import time

    start, f32 = time.monotonic(), np.float32
    for raws in (np.zeros((3, 8), np.uint16), np.zeros((3, 8), f32)):
        for out in (np.zeros(8, np.uint16), np.zeros(8, f32)):
            combine(raws, True, raws[0], 2, np.ones(2, f32), np.full(2, 0.5, f32), np.zeros((2, 8), f32), out, 0, 8)
            ones, no_draws = np.ones(2, f32), np.empty((2, 0), f32)
            thr, ties = np.zeros(2, f32), np.zeros(2, np.int64)
            consensus(raws, raws[0], ones, 1, ones, thr, ties, no_draws, True, f32(1.0), out, 0, 8)
            slerp_out(np.zeros((2, 8), raws.dtype), f32(0.5), f32(0.5), out)
            consensus_spec(
                raws,
                np.ones(2, f32),
                np.zeros(2, f32),
                True,
                f32(1.0),
                out,
                0,
                8,
                np.ones(2, np.bool_),
                np.zeros(2, np.int64),
                np.zeros(2, np.int64),
                0,
                np.zeros(2, np.int64),
                np.empty(4, np.int64),
                np.empty((3, 4), raws.dtype),
                np.zeros(1, np.int64),
            )
        count_ties(raws, np.zeros(2, f32), np.ones(2, np.int64), 0, 8, np.zeros(2, np.int64))
        cut_in_bin(raws, 0, 8, np.uint32(0), 1)
        window_counts(raws, 0, 8, 0, np.zeros(4, np.int64))
    for out in (np.zeros(8, np.uint16), np.zeros(8, f32)):
        scatter(out, np.arange(8), out.copy(), 8)
        ties_scan(
            raws,
            np.ones(2, np.bool_),
            np.zeros((2, 1 << 15), np.int64),
            True,
            np.zeros(2, np.int64),
            np.zeros(2, np.int64),
            np.empty((2, 4), f32),
            np.zeros(2, np.int64),
        )
    mt19937.warm_up()
    return time.monotonic() - start
