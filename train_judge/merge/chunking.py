"""The chunk machinery of the merge: row chunks, reused buffers, reader and half threads.

A tensor is merged a chunk of whole rows at a time (``row_chunks``, about ``CHUNK`` elements). The
next chunk's reads (and DARE's draws) run on worker threads while the current one is computed
(``prefetched``: each chunk's ``Jobs`` go to ``pool()``, results in chunk order, slots alternating
0 / 1); the kernels compute a chunk of ``SPLIT`` elements or more in two halves, the second on
``half_pool()``. Chunk-sized tensors live in ``BUFFERS`` (kept between chunks and tensors, cleared
by the engine after each merge), and ``piece`` casts a merged chunk into its slot's output buffer.

Callers read ``chunking.CHUNK`` and ``chunking.SPLIT`` at call time, so a test may change them.

Example (flat row ranges of a 5 x 3 tensor in chunks of 2 rows; a piece in bf16):
    >>> list(row_chunks((5, 3), 6))
    [(0, 2), (2, 4), (4, 5)]
    >>> piece(torch.ones(3), torch.bfloat16, 0).dtype
    torch.bfloat16
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

__all__ = ["BUFFERS", "CHUNK", "SPLIT", "Buffers", "Jobs", "half_pool", "piece", "pool", "prefetched", "row_chunks"]

CHUNK = 1 << 20
"""Target elements per piece for element-wise methods (4 MB per float32 buffer)."""
SPLIT = 1 << 16
"""The kernels compute chunks of at least this many elements in two halves, on two threads."""

Jobs = Callable[[int, int, int], list[Callable[[], Any]]]
"""``jobs(slot, r0, r1)``: the callables that read (and draw for) rows ``r0:r1`` into ``slot``'s
buffers; each one's result (a tensor, an array, a dict of them) comes back in ``prefetched``'s results."""

_POOL: ThreadPoolExecutor | None = None
_HALF: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """Worker threads that read the next chunk (positioned reads) and draw DARE's random numbers while
    the caller's thread computes the current one (torch, numba and ``os.preadv`` release the GIL)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=3, thread_name_prefix="merge-prefetch")
        return _POOL


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
        self._bufs: dict[tuple[Hashable, torch.dtype], torch.Tensor] = {}

    def get(self, key: Hashable, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
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


def prefetched(chunks: list[tuple[int, int]], jobs: Jobs) -> Iterator[tuple[int, int, int, list[Any]]]:
    """``(slot, r0, r1, results)`` per chunk: the results of ``jobs(slot, r0, r1)`` (callables run on
    the worker threads, each chunk's while the previous one is processed; ``slot`` alternates 0 / 1,
    so a job filling slot-keyed buffers never overwrites the chunk being processed)."""
    workers = pool()

    def submit(i: int) -> list[Future[Any]]:
        r0, r1 = chunks[i]
        return [workers.submit(job) for job in jobs(i % 2, r0, r1)]

    pending = submit(0) if chunks else []
    try:
        for i, (r0, r1) in enumerate(chunks):
            results = [f.result() for f in pending]
            pending = submit(i + 1) if i + 1 < len(chunks) else []
            yield i % 2, r0, r1, results
    finally:  # stopped early: let in-flight reads finish before the caller closes the files
        for f in pending:
            f.exception()


def piece(t: torch.Tensor, dtype: torch.dtype, slot: int) -> torch.Tensor:
    """``t`` in ``dtype`` (the same values as ``t.to(dtype)``) in the output buffer of ``slot``: a piece
    stays unchanged while the next one is computed, so the writer may write it meanwhile."""
    return BUFFERS.get(("piece", slot), t.numel(), dtype).copy_(t)
