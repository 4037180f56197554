"""Meta-evaluation metrics: how well a judge agrees with reference scores and labels.

Pure numpy/scipy functions over plain lists, each checked against hand-computed values in
``tests/benchmarks/test_metrics.py``. Missing judgments are ``None`` and are never replaced by a number:
correlations drop them (and report how many they dropped), accuracies count them as wrong.

Pairwise labels and predictions use ``"A"``, ``"B"`` (that response is better) and ``"tie"``;
a prediction may also be ``None`` (the judge failed).

Example:
    >>> round(correlations([1, 2, 3, 4], [1, 3, 2, 4])["pearson"], 3)
    0.8
    >>> pairwise_accuracy(["A", "B", "tie"], ["A", "A", "tie"], with_tie=True)
    0.6666666666666666
    >>> pairwise_accuracy(["A", "B", "tie"], ["A", "A", "tie"], with_tie=False)
    0.5
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

PairLabel = str  # "A" | "B" | "tie"
_LABELS = ("A", "B", "tie")


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def correlations(pred: Sequence[float | None], ref: Sequence[float]) -> dict[str, Any]:
    """Pearson, Spearman and Kendall tau-b (scipy's defaults, as the Prometheus papers) of the judge's
    scores against the reference; items whose prediction is None are left out and counted in ``dropped``.
    A constant input has no correlation: the value is None.

    >>> correlations([None, 2, 3, 4], [1, 2, 3, 4])["dropped"]
    1
    """
    from scipy import stats

    if len(pred) != len(ref):
        raise ValueError(f"correlations: {len(pred)} predictions but {len(ref)} references; pass one per item")
    pairs = [(float(p), float(r)) for p, r in zip(pred, ref, strict=True) if p is not None]
    out: dict[str, Any] = {
        "n": len(pairs),
        "dropped": len(pred) - len(pairs),
        "pearson": None,
        "spearman": None,
        "kendall": None,
    }
    if len(pairs) < 2:
        return out
    x, y = np.array([p for p, _ in pairs]), np.array([r for _, r in pairs])
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    out["pearson"] = _nan_to_none(stats.pearsonr(x, y)[0])
    out["spearman"] = _nan_to_none(stats.spearmanr(x, y)[0])
    out["kendall"] = _nan_to_none(stats.kendalltau(x, y)[0])
    return out


def exact_accuracy(pred: Sequence[float | None], ref: Sequence[float]) -> float | None:
    """Fraction of items whose (rounded) judge score equals the reference score (Feedback Bench's
    accuracy); a None prediction is wrong.

    >>> exact_accuracy([5, 3.4, None], [5, 3, 2])
    0.6666666666666666
    """
    if not ref:
        return None
    return sum(p is not None and round(p) == round(r) for p, r in zip(pred, ref, strict=True)) / len(ref)


def pairwise_accuracy(
    labels: Sequence[PairLabel], preds: Sequence[PairLabel | None], *, with_tie: bool
) -> float | None:
    """Pairwise accuracy as Prometheus 2 reports it (its eval code for Auto-J, MT-Bench human judgments).

    ``with_tie=False`` ("w/o tie"): pairs labelled ``"tie"`` are left out; a pair is correct when the
    prediction equals the label (a predicted tie or a failure is wrong).
    ``with_tie=True`` ("w/ tie"): every pair counts; a tie-labelled pair is correct only when the judge
    predicted ``"tie"``. For Direct2Pair the papers' tie prediction is "equal scores in the first round";
    build ``preds`` accordingly (``benchmarks.meta_eval`` does). None when no pair counts.

    >>> pairwise_accuracy(["tie", "tie"], ["A", None], with_tie=False) is None
    True
    """
    if len(labels) != len(preds):
        raise ValueError(f"pairwise_accuracy: {len(labels)} labels but {len(preds)} predictions")
    bad = sorted({str(x) for x in labels if x not in _LABELS})
    if bad:
        raise ValueError(f"pairwise labels must be 'A', 'B' or 'tie', got {bad}")
    kept = [(lab, p) for lab, p in zip(labels, preds, strict=True) if with_tie or lab != "tie"]
    if not kept:
        return None
    return sum(lab == p for lab, p in kept) / len(kept)


def by_group(groups: Sequence[Hashable], fn: Callable[..., Any], *columns: Sequence[Any]) -> dict[str, Any]:
    """``fn`` applied to each group's slice of ``columns`` (per-category breakdowns), keyed by group name.

    >>> by_group(["x", "y", "x"], lambda a: sum(a), [1, 2, 3])
    {'x': 4, 'y': 2}
    """
    idx: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        idx[g].append(i)
    return {str(g): fn(*[[col[i] for i in rows] for col in columns]) for g, rows in sorted(idx.items(), key=str)}


def krippendorff_alpha(ratings: Sequence[Sequence[float | None]], level: str = "ordinal") -> float | None:
    """Krippendorff's alpha of ``ratings[rater][item]`` (None = missing), via the ``krippendorff``
    package. The papers use it for the agreement of a judge's repeated samples (each sample is a
    "rater"). None when it is undefined (fewer than two pairable values, or no variation at all).

    >>> round(krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 4]]), 3)
    1.0
    """
    import krippendorff

    data = np.array([[np.nan if v is None else float(v) for v in row] for row in ratings], dtype=float)
    if data.ndim != 2 or data.shape[0] < 2:
        return None
    pairable = np.sum(~np.isnan(data), axis=0) >= 2
    values = data[:, pairable]
    if values.size == 0 or len(np.unique(values[~np.isnan(values)])) < 2:
        return None
    with np.errstate(all="ignore"):
        return _nan_to_none(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def swap_consistency(order_winners: Sequence[tuple[str | None, str | None]]) -> dict[str, Any]:
    """Agreement of a pairwise judge with itself across both presentation orders.

    ``order_winners``: per pair, the winner in the original order and the swapped order's winner mapped
    back to the original labels. ``rate`` is the fraction of pairs with both verdicts valid whose two
    verdicts agree; ``n`` the number of such pairs.

    >>> swap_consistency([("A", "A"), ("A", "B"), (None, "B")])
    {'rate': 0.5, 'n': 2}
    """
    both = [(a, b) for a, b in order_winners if a is not None and b is not None]
    return {"rate": (sum(a == b for a, b in both) / len(both)) if both else None, "n": len(both)}


def transitivity(verdicts: Mapping[tuple[Hashable, Hashable], str | None]) -> dict[str, Any]:
    """Fraction of triples of responses whose pairwise verdicts are transitive (no cycle).

    ``verdicts[(x, y)]`` is ``"A"`` when x beat y and ``"B"`` when y beat x (None/"tie": undecided).
    Pairs may be given in either order. A triple counts when all three of its pairs are decided; it is
    transitive unless the three wins form a cycle (x>y, y>z, z>x).

    >>> transitivity({("a", "b"): "A", ("b", "c"): "A", ("a", "c"): "A"})
    {'rate': 1.0, 'triples': 1}
    >>> transitivity({("a", "b"): "A", ("b", "c"): "A", ("c", "a"): "A"})
    {'rate': 0.0, 'triples': 1}
    """
    beats: dict[tuple[Hashable, Hashable], bool] = {}
    nodes: set[Hashable] = set()
    for (x, y), w in verdicts.items():
        nodes.update((x, y))
        if w in ("A", "B"):
            beats[(x, y)] = w == "A"
            beats[(y, x)] = w == "B"
    good = total = 0
    for a, b, c in itertools.combinations(sorted(nodes, key=str), 3):
        if not all(p in beats for p in ((a, b), (b, c), (a, c))):
            continue
        total += 1
        cycle = (beats[(a, b)] and beats[(b, c)] and beats[(c, a)]) or (
            beats[(b, a)] and beats[(c, b)] and beats[(a, c)]
        )
        good += not cycle
    return {"rate": good / total if total else None, "triples": total}


def failure_rate(failures: int, samples: int) -> float | None:
    """Parse failures per sample (None with no samples).

    >>> failure_rate(1, 4)
    0.25
    """
    return failures / samples if samples else None


def confusion_matrix(pred: Sequence[float | None], ref: Sequence[float]) -> list[list[int]]:
    """5x5 counts: row = reference score (rounded, 1..5), column = judge score (rounded); items with no
    judge score are left out.

    >>> confusion_matrix([5, 4.6, None], [5, 4, 1])[4][4], confusion_matrix([5, 4.6], [5, 4])[3][4]
    (1, 1)
    """
    m = np.zeros((5, 5), dtype=int)
    for p, r in zip(pred, ref, strict=True):
        if p is not None:
            m[min(max(int(round(r)), 1), 5) - 1][min(max(int(round(p)), 1), 5) - 1] += 1
    return m.tolist()


def calibration(expected: Sequence[float | None], ref: Sequence[float], bins: int = 4) -> list[dict[str, Any]]:
    """Reliability of the expected score: the range 1..5 cut into ``bins`` equal bins of expected score;
    per bin the count, mean expected score and mean reference score (perfect calibration: equal means).

    >>> calibration([1.2, 1.4, 4.9], [1, 2, 5], bins=2)[0]
    {'lo': 1.0, 'hi': 3.0, 'n': 2, 'expected': 1.3, 'reference': 1.5}
    """
    edges = np.linspace(1.0, 5.0, bins + 1)
    out = []
    for b in range(bins):
        lo, hi = float(edges[b]), float(edges[b + 1])
        sel = [
            (e, r)
            for e, r in zip(expected, ref, strict=True)
            if e is not None and (lo <= e < hi or (b == bins - 1 and e == hi))
        ]
        out.append(
            {
                "lo": lo,
                "hi": hi,
                "n": len(sel),
                "expected": round(float(np.mean([e for e, _ in sel])), 6) if sel else None,
                "reference": round(float(np.mean([r for _, r in sel])), 6) if sel else None,
            }
        )
    return out
