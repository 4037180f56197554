"""TIES in one pass over its inputs (the numba path): merge first, then fix the few undecided elements.

Each model's trim keeps its ``k`` largest ``|delta|``s, so the merge needs every model's cut-off
before any output, and the two-pass path (``ties_cuts.cuts``) reads every input twice. Here the first
chunk's histogram of the high 16 bits of ``|delta|`` places, per model, a window of bins around
the cut-off (``ties_cuts.window``). Outside the window an element's trim is already known (above it:
kept, below: dropped), so one pass over the inputs (``kernels.consensus_spec``, a large chunk in two
halves on two threads) merges every chunk with the window's upper edge as each model's threshold,
into an output buffer of the whole tensor, and in the same loop counts, per model, the elements
above its window and keeps the index and raw inputs of every element that falls in some model's
window, in element order.

Then the exact cut-offs: the elements above each window were counted, the kept elements give the
counts inside it, so the bin holding the ``k``-th largest ``|delta|`` and its rank there are known
(``kernels.window_counts``); counts of the low 16 bits of that bin's entries, all among the kept
elements, give the threshold and the ties kept at it (``kernels.cut_in_bin``, the numbers
``trim.MagnitudeCut.from_bin`` gives). The kept elements are merged again with the exact thresholds
and ties (``kernels.consensus``, in element order, so ties at the cut-off count down exactly as they
would over the whole tensor) and written over their first result. The output is the two-pass path's, bit
for bit. When the first chunk misleads (the cut-off's bin falls outside a window, or the window
overflows its capacity), ``one_pass`` returns False and the caller runs the two-pass path.

Memory: the output tensor (at most the largest input tensor's bytes, else the two-pass path runs; not
float16, which the kernels write as float32 first) and the kept elements (a few times ``WINDOW`` of
the entries per model: windows are whole bins). Tensors of one chunk take the two-pass path (their
histogram is exact from the start and nothing is read twice).

Example (the window's upper edge as a threshold: bin 0x3F80 is |delta| in [1.0, 1.0078125)):
    >>> float(upper_edge(0x3F80)) > 1.0078
    True
"""

from __future__ import annotations

import numpy as np

from . import chunking, kernels, ties_cuts
from .chunking import Jobs, half_pool, pool, prefetched
from .trim import cut_bin

WINDOW = 0.01
"""Half-width (as a fraction of entries) of the window of bins around each model's cut-off."""
INF_BIN = 0x7F80
"""The bin of +inf: a window reaching it has no finite upper edge (the two-pass path runs)."""


def upper_edge(b: int) -> np.float32:
    """The largest float32 magnitude whose high 16 bits are ``b``: ``|d| > upper_edge(b)`` iff its bin is
    above ``b``."""
    return np.array([(b << 16) | 0xFFFF], np.uint32).view(np.float32)[0]


def one_pass(
    chunks: list[tuple[int, int]],
    jobs: Jobs,
    row: int,
    ks: list[int],
    thr: np.ndarray,
    weights: np.ndarray,
    normalize: bool,
    lam: np.float32,
    out: np.ndarray,
) -> bool:
    """Merge a TIES tensor in one pass into ``out`` (its flat output, bf16 bits or float32); False
    (``out`` unspecified) when the window missed and the two-pass path must run.

    ``jobs(slot, r0, r1)``: the chunk's read (its result: raw rows, base first); ``ks``: entries kept
    per model; ``thr``: thresholds as the two-pass path starts them (-1 keeps all, inf none), filled in
    with the exact ones; ``weights`` (float32 per model), ``normalize``, ``lam``: as ``kernels.consensus``."""
    n = sum((r1 - r0) * row for r0, r1 in chunks)
    n_models = len(ks)
    need = np.array([0 < k < n for k in ks])
    above, namb = np.zeros(n_models, np.int64), np.zeros(1, np.int64)
    edges = thr.copy()
    lo = hi = amb_idx = np.zeros(0, np.int64)  # (the first chunk sets them)
    amb_raw = np.zeros((0, 0), np.float32)
    # the second half's own counts and kept elements (halves run side by side)
    second: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    for i, (_, r0, r1, results) in enumerate(prefetched(chunks, jobs)):
        raws, count, start = results[0], (r1 - r0) * row, r0 * row
        if i == 0:  # the window, from this chunk's histogram
            hist = np.zeros((n_models, 1 << 15), np.int64)
            kernels.ties_scan(
                raws,
                need,
                hist,
                True,
                np.ones(n_models, np.int64),
                np.zeros(n_models, np.int64),
                np.empty((n_models, 0), np.float32),
                np.zeros(n_models, np.int64),
            )
            lo, hi, cap = ties_cuts.window(hist, ks, need, count, n, False, False, WINDOW)
            if cap == 0 or any(need[m] and not lo[m] <= hi[m] < INF_BIN for m in range(n_models)):
                return False
            for m in np.flatnonzero(need):
                edges[m] = upper_edge(int(hi[m]))
            cap = min(n, cap * int(need.sum()))  # the union of the models' windows
            amb_idx, amb_raw = np.empty(cap, np.int64), np.empty((raws.shape[0], cap), raws.dtype)
            if count >= chunking.SPLIT:
                room = min(cap, count)
                second = (
                    np.zeros(n_models, np.int64),
                    np.empty(room, np.int64),
                    np.empty((raws.shape[0], room), raws.dtype),
                    np.zeros(1, np.int64),
                )

        def spec(
            a: int,
            b: int,
            counts: np.ndarray,
            idx: np.ndarray,
            kept: np.ndarray,
            k: np.ndarray,
            raws: np.ndarray = raws,
            o: np.ndarray = out[start : start + count],
            start: int = start,
            lo: np.ndarray = lo,
            hi: np.ndarray = hi,
        ) -> None:
            kernels.consensus_spec(
                raws, weights, edges, normalize, lam, o, a, b, need, lo, hi, start, counts, idx, kept, k
            )

        if count < chunking.SPLIT or second is None:
            spec(0, count, above, amb_idx, amb_raw, namb)
            continue
        h = count // 2 // kernels.BLOCK * kernels.BLOCK
        counts2, idx2, kept2, k2 = second
        counts2[:], k2[0] = 0, 0
        job = half_pool().submit(spec, h, count, *second)
        spec(0, h, above, amb_idx, amb_raw, namb)
        job.result()
        above += counts2
        c, k = int(namb[0]), int(k2[0])
        if k <= idx2.shape[0] and c + k <= amb_idx.shape[0]:  # the second half's after the first's
            amb_idx[c : c + k], amb_raw[:, c : c + k] = idx2[:k], kept2[:, :k]
            namb[0] = c + k
        else:
            namb[0] = amb_idx.shape[0] + 1  # overflow
    a = int(namb[0])
    if a > amb_idx.shape[0]:
        return False
    ties = np.zeros(n_models, np.int64)

    def cut(m: int) -> bool:  # model m's exact cut-off: its bin and rank from the counts, then within its bin
        counts = np.zeros(int(hi[m] - lo[m]) + 2, np.int64)
        kernels.window_counts(amb_raw, m, a, lo[m], counts)
        counts[-1] = above[m]  # (the kernel's last entry counted the elements outside; now: all above the window)
        if not above[m] < ks[m] <= counts.sum():
            return False  # the k-th largest is outside the window
        j, rank = cut_bin(counts, ks[m])  # a bin of the window (the top entry holds fewer than k)
        thr[m], ties[m] = kernels.cut_in_bin(amb_raw, m, a, np.uint32(lo[m] + j), rank)
        return bool(np.isfinite(thr[m]))

    models = [int(m) for m in np.flatnonzero(need)]
    others = [pool().submit(cut, m) for m in models[1:]]  # the kernels release the GIL: side by side
    if not all([cut(models[0])] + [f.result() for f in others]):
        return False
    fixed = np.empty(a, out.dtype)
    ones, no_draws = np.ones(n_models, np.float32), np.empty((n_models, 0), np.float32)
    kernels.consensus(amb_raw, amb_raw[0], weights, 1, ones, thr, ties, no_draws, normalize, lam, fixed, 0, a)
    kernels.scatter(out, amb_idx, fixed, a)
    return True
