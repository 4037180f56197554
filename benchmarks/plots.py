"""PNG figures of a meta-evaluation: the score confusion matrix and the expected-score calibration.

matplotlib with the Agg backend (no display needed).

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.png")
    >>> plot_confusion([[1, 0, 0, 0, 0]] * 5, path)
    >>> open(path, "rb").read(4) == b"\\x89PNG"
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_confusion(matrix: Sequence[Sequence[int]], path: str | Path, title: str = "") -> None:
    """Heat map: rows = reference score 1..5, columns = judge score 1..5, cells = counts."""
    fig, ax = plt.subplots(figsize=(4.2, 3.8))
    im = ax.imshow(matrix, cmap="Blues", origin="lower")
    for r, row in enumerate(matrix):
        for c, v in enumerate(row):
            ax.text(c, r, str(v), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(5), [str(i) for i in range(1, 6)])
    ax.set_yticks(range(5), [str(i) for i in range(1, 6)])
    ax.set_xlabel("judge score (rounded mean)")
    ax.set_ylabel("reference score (rounded mean)")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_calibration(bins: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> None:
    """Mean reference score against mean expected score per bin (the diagonal is perfect calibration);
    marker size grows with the bin's count."""
    fig, ax = plt.subplots(figsize=(4.2, 3.8))
    pts = [b for b in bins if b["n"]]
    ax.plot([1, 5], [1, 5], color="grey", lw=1, ls="--")
    if pts:
        ax.scatter(
            [b["expected"] for b in pts],
            [b["reference"] for b in pts],
            s=[20 + 4 * b["n"] for b in pts],
            color="tab:orange",
        )
    ax.set_xlim(1, 5)
    ax.set_ylim(1, 5)
    ax.set_xlabel("judge expected score (bin mean)")
    ax.set_ylabel("reference score (bin mean)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cascade(
    curves: dict[str, Sequence[float]], fractions: Sequence[float], path: str | Path, metric: str = "", title: str = ""
) -> None:
    """Cascade quality (``metric``) against the share of items routed to the fallback, one line per
    uncertainty indicator (``random`` dashed, as the baseline)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, ys in curves.items():
        ax.plot(
            [100 * f for f in fractions],
            ys,
            marker="o",
            markersize=3,
            label=name,
            linestyle="--" if name == "random" else "-",
        )
    ax.set_xlabel("items routed to the fallback (%)")
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
