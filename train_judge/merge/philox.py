"""DARE's counter-based generator: Philox4x32-10 (Salmon et al., 2011), ``rng: philox`` in a merge config.

torch's CPU generator (MT19937, the default ``rng: mt19937``, drawn by ``mt19937.MT19937`` at ~0.3 ns
per draw) is one serial stream per (tensor, model): a chunk's draws need every earlier chunk's. Philox
is a keyed bijection of a counter: element ``i`` of (seed, tensor name, model) draws lane ``i % 4`` of
``philox(counter = i // 4, key)``, the key being 64 bits of sha256 of (seed, tensor name, model
index), and ``u = (x >> 8) * 2**-24`` (the high 24 bits; torch's float32 ``uniform_`` takes the low
24). Any element's draw is computed on its own, so chunks and threads need no shared state (chunking
cannot change the masks, by construction), and the numba ``philox_fill`` vectorizes (~0.5 ns per draw).
Other masks than ``mt19937``: a merge made with one generator is re-made only with the same one.
``philox_uniform`` is the same stream in numpy (the torch path, and the tests).

Example (the Philox4x32-10 known-answer vector of Random123, counter 0, key 0):
    >>> [hex(int(x)) for x in philox_block(np.zeros(1, np.uint64), 0, 0)[0]]
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85

try:
    from numba import njit

    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False


def philox_key(seed: int, name: str, model: int) -> tuple[int, int]:
    """The Philox key (two 32-bit words) of (seed, tensor name, model index)."""
    d = hashlib.sha256(f"philox\0{seed}\0{name}\0{model}".encode()).digest()
    return int.from_bytes(d[:4], "little"), int.from_bytes(d[4:8], "little")


def philox_block(counters: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """Philox4x32-10 of 64-bit ``counters`` (words 0-1; words 2-3 are 0): a ``(len, 4)`` uint32 array."""
    c = [
        (counters & 0xFFFFFFFF).astype(np.uint64),
        (counters >> np.uint64(32)).astype(np.uint64),
        np.zeros_like(counters, np.uint64),
        np.zeros_like(counters, np.uint64),
    ]
    key0, key1 = np.uint64(k0), np.uint64(k1)
    mask = np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r:
            key0, key1 = (key0 + np.uint64(_W0)) & mask, (key1 + np.uint64(_W1)) & mask
        p0, p1 = np.uint64(_M0) * c[0], np.uint64(_M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ key0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ key1, p0 & mask]
    return np.stack(c, axis=1).astype(np.uint32)


def philox_uniform(k0: int, k1: int, start: int, count: int) -> np.ndarray:
    """Uniform float32 draws in [0, 1) of elements ``start .. start + count - 1`` (numpy reference)."""
    first, last = start // 4, (start + count + 3) // 4
    x = philox_block(np.arange(first, last, dtype=np.uint64), k0, k1).reshape(-1)[start - 4 * first :][:count]
    return (x >> 8).astype(np.float32) * np.float32(2.0**-24)


if HAVE_NUMBA:
    _jit = njit(cache=True, nogil=True)

    @_jit
    def _philox(c0, c1, k0, k1):  # noqa: ANN001
        c2 = c3 = np.uint64(0)
        m = np.uint64(0xFFFFFFFF)
        for r in range(10):
            if r:
                k0, k1 = (k0 + np.uint64(_W0)) & m, (k1 + np.uint64(_W1)) & m
            p0, p1 = np.uint64(_M0) * c0, np.uint64(_M1) * c2
            c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & m, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & m
        return c0, c1, c2, c3

    @_jit
    def _rounds(x0, x1, x2, x3, k0, k1):  # noqa: ANN001
        """The 10 Philox4x32 rounds on counters (x0, x1, x2, x3)[j] (uint32 arrays, in place)."""
        m = np.uint64(0xFFFFFFFF)
        for r in range(10):
            if r:
                k0, k1 = (k0 + np.uint64(_W0)) & m, (k1 + np.uint64(_W1)) & m
            for j in range(x0.shape[0]):
                p0, p1 = np.uint64(_M0) * np.uint64(x0[j]), np.uint64(_M1) * np.uint64(x2[j])
                x0[j], x1[j], x2[j], x3[j] = (
                    np.uint32((p1 >> np.uint64(32)) ^ np.uint64(x1[j]) ^ k0),
                    np.uint32(p1 & m),
                    np.uint32((p0 >> np.uint64(32)) ^ np.uint64(x3[j]) ^ k1),
                    np.uint32(p0 & m),
                )

    @_jit
    def _uniform(x):  # noqa: ANN001 - the top 24 bits of a 32-bit draw as a float32 in [0, 1)
        return np.float32(np.uint32(x) >> np.uint32(8)) * np.float32(2.0**-24)

    @_jit
    def philox_fill(out, k0, k1, start):  # noqa: ANN001
        """``out[:] =`` the uniform draws of elements ``start ..`` (same numbers as ``philox_uniform``)."""
        n, i = out.shape[0], 0
        key0, key1, m = np.uint64(k0), np.uint64(k1), np.uint64(0xFFFFFFFF)
        c = np.uint64(start >> 2)
        lane = start & 3
        if lane:  # the rest of a started counter
            x = _philox(c & m, c >> np.uint64(32), key0, key1)
            while lane < 4 and i < n:
                out[i] = _uniform(x[lane])
                lane += 1
                i += 1
            c += np.uint64(1)
        full = (n - i) // 4
        x = np.empty((4, 256), np.uint32)
        for j0 in range(0, full, 256):  # whole counters, 256 at a time through the rounds (vectorized)
            L = min(256, full - j0)
            x0, x1, x2, x3 = x[0, :L], x[1, :L], x[2, :L], x[3, :L]
            for j in range(L):
                cj = c + np.uint64(j0 + j)
                x0[j], x1[j], x2[j], x3[j] = np.uint32(cj & m), np.uint32(cj >> np.uint64(32)), 0, 0
            _rounds(x0, x1, x2, x3, key0, key1)
            o = out[i + 4 * j0 : i + 4 * (j0 + L)]
            for j in range(L):
                o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3] = (
                    _uniform(x0[j]),
                    _uniform(x1[j]),
                    _uniform(x2[j]),
                    _uniform(x3[j]),
                )
        i += 4 * full
        if i < n:
            x = _philox((c + np.uint64(full)) & m, (c + np.uint64(full)) >> np.uint64(32), key0, key1)
            for t in range(n - i):
                out[i + t] = _uniform(x[t])


def uniform_job(rng: str, generator: Any, key: tuple[int, int], buf: Any, start: int) -> Callable[[], Any]:
    """A job filling the float32 tensor ``buf`` with one model's draws of elements ``start ..``: from
    torch's ``generator`` (MT19937, in element order) or, for ``rng == "philox"``, from ``key``."""
    if rng == "philox":
        import torch

        return lambda: buf.copy_(torch.from_numpy(philox_uniform(*key, start, buf.numel())))
    return lambda: buf.uniform_(generator=generator)
