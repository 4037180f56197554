"""TIES cut-offs on the numba path: each model's threshold and tie count over a whole tensor.

TIES keeps each model's ``k`` largest ``|delta|``s, so before any output it needs each model's
cut-off magnitude. ``cuts`` finds it in one pass over base + all models that gathers every model's
histogram of the high 16 bits of ``|delta|`` (``kernels.ties_scan``) and, after the first chunk has
shown roughly where the cut-off lies (``window``), keeps the ``|delta|``s of a window of bins around
it; the exact bin is then known from the full histogram, and its entries give the exact threshold
and tie count (``trim.MagnitudeCut.from_bin``). Only if the bin fell outside the window (or the
window overflowed) is another pass made to gather it. ``fused`` then merges with these cut-offs in
a second pass; ``ties_pass`` uses ``window`` to merge in one pass where it can.

Example (keeping 3 of 10 entries needs a cut-off, keeping all needs none: -1):
    >>> start_thresholds([3, 10], 10).tolist()
    [inf, -1.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import kernels
from .chunking import pool, prefetched
from .trim import MagnitudeCut, cut_bin, keep_count

WINDOW = 0.03
"""Half-width (as a fraction of entries) of the bins whose |delta|s TIES's first pass keeps."""


def cuts(
    chunks: list[tuple[int, int]],
    jobs: Callable[..., list[Callable[[], Any]]],
    n_models: int,
    dens: list[float],
    n: int,
    row: int,
    cached: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Each model's TIES cut-off (threshold, ties kept at it) over the whole tensor (see the module doc);
    ``cached``: the first pass keeps the rows, so the bins are gathered from memory, without a window."""
    ks = [keep_count(k, n) for k in dens]
    thr = start_thresholds(ks, n)
    ties = np.zeros(n_models, np.int64)
    need = np.array([0 < k < n for k in ks])
    if not need.any():
        return thr, ties
    hist = np.zeros((n_models, 1 << 15), np.int64)
    lo, hi = np.ones(n_models, np.int64), np.zeros(n_models, np.int64)  # empty windows
    ncand = np.zeros(n_models, np.int64)
    cand = np.empty((n_models, 0), np.float32)
    for i, (_, r0, r1, results) in enumerate(prefetched(chunks, lambda s, a, b: jobs(s, a, b, False))):
        if i == 0:  # the first chunk's histogram places the window; then its candidates
            _scan(results[0], need, hist, True, lo, hi, cand, ncand)
            lo, hi, cap = window(hist, ks, need, (r1 - r0) * row, n, len(chunks) == 1, cached)
            cand = np.empty((n_models, cap), np.float32)
            _scan(results[0], need, hist, False, lo, hi, cand, ncand)
        else:
            _scan(results[0], need, hist, True, lo, hi, cand, ncand)
    bins = [cut_bin(hist[m], ks[m]) if need[m] else (0, 0) for m in range(n_models)]
    again = np.zeros(n_models, bool)
    for m in np.flatnonzero(need):
        if lo[m] <= bins[m][0] <= hi[m] and ncand[m] <= cand.shape[1]:
            _set_cut(m, cand[m, : ncand[m]], bins[m], hist, thr, ties)
        else:  # the bin fell outside the window: gathered exactly in one more pass
            again[m] = True
    if again.any():
        lo = hi = np.array([b for b, _ in bins], np.int64)
        cand = np.empty((n_models, max(int(hist[m, bins[m][0]]) for m in np.flatnonzero(again))), np.float32)
        ncand = np.zeros(n_models, np.int64)
        for _, _, _, results in prefetched(chunks, lambda s, a, b: jobs(s, a, b, False, not cached)):
            _scan(results[0], again, hist, False, lo, hi, cand, ncand)
        for m in np.flatnonzero(again):
            _set_cut(m, cand[m, : ncand[m]], bins[m], hist, thr, ties)
    return thr, ties


def start_thresholds(ks: list[int], n: int) -> np.ndarray:
    """Per model keeping ``ks[m]`` of ``n``: -1 (keep all), inf (keep none) or, to be found, inf."""
    return np.array([-1.0 if k >= n else math.inf for k in ks], np.float32)


def _scan(raws: np.ndarray, need: np.ndarray, *args: Any) -> None:
    """``kernels.ties_scan`` with the models split over two threads (the kernel releases the GIL, and
    each model has its own rows of the histogram and candidates)."""
    idx = np.flatnonzero(need)
    if len(idx) < 2:
        return kernels.ties_scan(raws, need, *args)
    first = np.zeros_like(need)
    first[idx[: len(idx) // 2]] = True
    job = pool().submit(kernels.ties_scan, raws, first, *args)
    kernels.ties_scan(raws, need & ~first, *args)
    job.result()


def _set_cut(
    m: int, sel: np.ndarray, bin_rank: tuple[int, int], hist: np.ndarray, thr: np.ndarray, ties: np.ndarray
) -> None:
    """Model ``m``'s threshold and ties from the gathered |delta|s ``sel`` (those of its bin, and others)."""
    c = np.ascontiguousarray(sel[(sel.view(np.uint32) >> 16) == bin_rank[0]])
    assert c.size == hist[m, bin_rank[0]]
    cut = MagnitudeCut.from_bin(c, bin_rank[1])
    thr[m], ties[m] = cut.threshold, cut.ties


def window(
    hist: np.ndarray, ks: list[int], need: np.ndarray, n0: int, n: int, whole: bool, cached: bool, width: float = WINDOW
) -> tuple[np.ndarray, np.ndarray, int]:
    """Per model, the bins lo..hi to gather from the first chunk's counts (the exact bin when that chunk
    is the whole tensor), and a capacity for them (0: no window, gather in a second pass, as when the
    rows are ``cached``: a pass over memory for one bin costs less than gathering a window on the way)."""
    lo, hi = np.ones(len(ks), np.int64), np.zeros(len(ks), np.int64)
    cap = 0
    for m in np.flatnonzero(need) if whole or not cached else []:
        if whole:
            lo[m] = hi[m] = cut_bin(hist[m], ks[m])[0]
            cap = max(cap, int(hist[m, lo[m]]))
            continue
        q = ks[m] / n
        cum = np.cumsum(hist[m, ::-1])[::-1]  # entries in bins >= b
        top = np.flatnonzero(cum >= max(q - width, 0.0) * n0)
        low = np.flatnonzero(cum >= min(q + width, 1.0) * n0)
        h = int(top[-1]) if q - width > 0 and top.size else (1 << 15) - 1
        lw = int(low[-1]) if low.size else 0
        upper = int(cum[h + 1]) if h + 1 < len(cum) else 0
        want = int((int(cum[lw]) - upper) / n0 * n * 1.25) + 4096
        if want <= n // 4:
            lo[m], hi[m], cap = lw, h, max(cap, want)
    return lo, hi, cap
