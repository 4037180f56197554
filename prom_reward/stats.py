"""Small statistics shared by the diagnostics, the hacking probe and the report: ranks, correlations, a
least-squares slope and a seeded percentile bootstrap."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    _, tie, counts = np.unique(np.asarray(values, dtype=float), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # the rank of each distinct value's last copy
    return ((last - (counts - 1) / 2)[tie.reshape(-1)]).tolist()


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation; None with fewer than 2 points or a constant input."""
    if len(x) != len(y):
        raise ValueError(f"pearson: {len(x)} x values but {len(y)} y values; pass one pair per item")
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 1e-12 * max(1.0, mx * mx) * n or syy <= 1e-12 * max(1.0, my * my) * n:
        return None
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (Pearson of average ranks, as scipy); None where undefined."""
    return pearson(ranks(x), ranks(y))


def slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope of ``y`` on ``x``; None with fewer than 2 distinct ``x``."""
    n = len(x)
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    if sxx <= 1e-12:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Seeded percentile bootstrap interval of ``statistic`` over ``values``; one value gives a zero-width interval."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap_ci: no values to resample")
    if not 0.0 < level < 1.0:
        raise ValueError(f"bootstrap_ci: level must lie in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    stats = np.array([statistic(row) for row in data[idx]], dtype=float)
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)
