"""TIES magnitude trim with an exact count: keep ``round(density * n)`` entries, ties broken by position.

A tensor is trimmed a chunk of rows at a time, so the rule is split in two: first each model's cut-off
over the whole tensor, the magnitude ``threshold`` and how many entries exactly at it are kept
(``ties``); then chunks are trimmed in element order, keeping every entry above the threshold and
the first ``ties`` entries equal to it (``kernels._trim``). The cut-off comes from a histogram of
the high 16 bits of ``|delta|`` (non-negative floats order as their bit patterns): ``cut_bin`` finds
the bin holding the k-th largest magnitude, and ``MagnitudeCut.from_bin`` selects it exactly among
that bin's entries only (``ties_cuts``, ``ties_pass``). The result is a whole-tensor trim's
(``tests/train_judge/merge/test_semantics.py`` checks it against a stable sort).

mergekit 0.1.5 keeps ``max(1, floor(density * n))`` entries (an argsort), so on odd counts it may
keep one fewer; its order among equal magnitudes is the sort's.

Example (keep 3 of ``[2, -2, 2, 1, 3]``: the 3, then the first two of the three 2s):
    >>> cut = MagnitudeCut.from_bin(np.array([2.0, 2.0, 2.0], np.float32), 2)
    >>> cut.threshold, cut.ties
    (2.0, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


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
    def from_bin(cls, cand: np.ndarray, r: int) -> MagnitudeCut:
        """The cut whose threshold is the ``r``-th largest of ``cand``, every magnitude of the 16-bit bin
        that holds the k-th largest overall (``cut_bin``); ``cand`` is reordered."""
        cand.partition(cand.size - r)
        threshold = float(cand[cand.size - r])
        # k minus those strictly above (np.count_nonzero: a bool sum in torch would copy to int64)
        return cls(threshold, r - int(np.count_nonzero(cand[cand.size - r :] > threshold)))
