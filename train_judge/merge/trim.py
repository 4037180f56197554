"""TIES magnitude trim with an exact count: keep ``round(density * n)`` entries, ties broken by position.

``magnitude_trim(delta, density)`` trims a whole tensor in place. For a tensor merged a chunk of rows
at a time, ``MagnitudeCut`` splits the same rule in two: ``MagnitudeCut.measure`` finds, from all of
``|delta|`` (one float32 buffer of the tensor's size), the cut-off magnitude ``threshold`` and how
many entries exactly at it are kept (``ties``); ``cut.apply(chunk)`` then trims chunks in element
order, keeping every entry above the threshold and the first ``ties`` entries equal to it. Both give
the same result (``tests/train_judge/merge/test_semantics.py`` checks them against a stable sort).

mergekit 0.1.5 keeps ``max(1, floor(density * n))`` entries (an argsort), so on odd counts it may
keep one fewer; its order among equal magnitudes is the sort's.

Example:
    >>> import torch
    >>> d = torch.tensor([2.0, -2.0, 2.0, 1.0, 3.0])
    >>> cut = MagnitudeCut.measure(d.abs(), 0.6)   # keep 3: the 3, then the first two of the three 2s
    >>> cut.threshold, cut.ties
    (2.0, 2)
    >>> torch.cat([cut.apply(d[:2].clone()), cut.apply(d[2:].clone())])
    tensor([ 2., -2.,  0.,  0.,  3.])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


def keep_count(density: float, n: int) -> int:
    """Entries a magnitude trim keeps: ``round(density * n)`` (halves round up), exactly.

    >>> keep_count(0.5, 7), keep_count(0.2, 10), keep_count(0.2, 2), keep_count(1.0, 3)
    (4, 2, 0, 3)
    """
    return n if density >= 1.0 else min(n, int(math.floor(density * n + 0.5)))


def cut_bin(counts: np.ndarray, k: int) -> tuple[int, int]:
    """``(b, r)``: the bin (high 16 bits of the float32 magnitude) holding the ``k``-th largest of the
    magnitudes counted in ``counts``, and that magnitude's rank ``r`` (1 = largest) within the bin.

    >>> cut_bin(np.array([5, 0, 3, 2]), 4)   # bins 3 and 2 hold the 5 largest: the 4th is 2nd of bin 2
    (2, 2)
    """
    at_or_above = np.cumsum(counts[::-1])[::-1]  # entries in bins >= b
    b = int(np.flatnonzero(at_or_above >= k)[-1])
    above = int(at_or_above[b + 1]) if b + 1 < len(counts) else 0  # entries in higher bins
    return b, k - above  # 1 <= r <= counts[b]


@dataclass
class MagnitudeCut:
    """The trim of one tensor: keep ``|d| > threshold``, and the first ``ties`` entries with ``|d| == threshold``."""

    threshold: float
    """The k-th largest magnitude (``inf`` keeps nothing, ``-1`` keeps everything)."""

    ties: int
    """How many entries exactly at the threshold are still to keep (counts down as chunks go by)."""

    @classmethod
    def measure(cls, mag: torch.Tensor, density: float, hist: torch.Tensor | None = None) -> MagnitudeCut:
        """The cut for ``|delta|`` = ``mag`` (a float32 tensor of the whole tensor, left unchanged).

        ``hist``: counts of ``mag``'s high 16 bits (``torch.bincount(bits >> 16, minlength=2**15)``),
        computed here when not given. Non-negative floats order as their bit patterns, so the counts
        locate the 16-bit bin holding the k-th largest magnitude; only that bin's entries are then
        selected exactly (an O(m) ``np.partition`` on m << n candidates) instead of all n.
        """
        n = mag.numel()
        k = keep_count(density, n)
        if k >= n:
            return cls(-1.0, 0)
        if k == 0:
            return cls(math.inf, 0)
        flat = mag.reshape(-1)
        bits = flat.view(torch.int32)
        if hist is None:
            hist = torch.bincount(bits >> 16, minlength=1 << 15)
        b, r = cut_bin(hist.numpy(), k)
        cand = np.empty(int(hist[b]), dtype=np.float32)
        got, step = 0, 1 << 20
        np_bits, np_mag = bits.numpy(), flat.numpy()
        for s in range(0, n, step):  # the bin's entries, a cache-sized piece at a time
            sel = np_mag[s : s + step][(np_bits[s : s + step] >> 16) == b]
            cand[got : got + sel.size] = sel
            got += sel.size
        assert got == cand.size
        return cls.from_bin(cand, r)

    @classmethod
    def from_bin(cls, cand: np.ndarray, r: int) -> MagnitudeCut:
        """The cut whose threshold is the ``r``-th largest of ``cand``, every magnitude of the 16-bit bin
        that holds the k-th largest overall (``cut_bin``); ``cand`` is reordered."""
        cand.partition(cand.size - r)
        threshold = float(cand[cand.size - r])
        # k minus those strictly above (np.count_nonzero: a bool sum in torch would copy to int64)
        return cls(threshold, r - int(np.count_nonzero(cand[cand.size - r :] > threshold)))

    def apply(self, chunk: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
        """Trim the next chunk (in element order) of the tensor in place; returns it. ``scratch``: a
        float32 buffer of the chunk's size to work in (else one is allocated)."""
        if self.threshold < 0:
            return chunk
        flat = chunk.view(-1)
        mag = torch.abs(flat, out=scratch.view(-1)) if scratch is not None else flat.abs()
        if self.ties > 0:  # ties at the threshold still to keep: count this chunk's (float masks: bool ones are slow)
            eq = mag.eq(self.threshold)
            ties = int(torch.count_nonzero(eq))
            keep = mag.ge_(self.threshold)  # 1.0 / 0.0, in place
            if ties > self.ties:  # keep only the first self.ties of them (lowest indices)
                keep[torch.nonzero(eq).view(-1)[self.ties :]] = 0.0
            self.ties = max(0, self.ties - ties)
        else:
            keep = mag.gt_(self.threshold)
        return flat.mul_(keep).view(chunk.shape)


def magnitude_trim(delta: torch.Tensor, density: float) -> torch.Tensor:
    """Keep exactly ``keep_count(density, n)`` entries of ``delta``, those of largest magnitude; zero the rest.

    Ties at the cut-off magnitude are broken by position: among equal magnitudes the lowest flat indices
    are kept, so the count is exact even on bf16 deltas, where many entries share a value. Works in
    place (returns ``delta``); the k-th largest magnitude comes from an O(n) selection, not a sort.

    >>> magnitude_trim(torch.tensor([1.0, -4.0, 2.0, 3.0]), 0.5)
    tensor([ 0., -4.,  0.,  3.])
    >>> magnitude_trim(torch.tensor([2.0, -2.0, 2.0, 1.0]), 0.5)  # three tie at 2: the first two stay
    tensor([ 2., -2.,  0.,  0.])
    """
    if keep_count(density, delta.numel()) >= delta.numel():
        return delta
    cut = MagnitudeCut.measure(delta.abs(), density)
    return cut.apply(delta)
