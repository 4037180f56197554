"""The report's checklist section: pass rates per criterion and per category, and the criteria the judge most
often could not decide, from a graded file's ``checklist_verdicts`` column.

Example:
    >>> v = [{"criterion": "Says 4", "category": "essential", "satisfied": True},
    ...      {"criterion": "Is rude", "category": "pitfall", "satisfied": True}]
    >>> s = checklist_summary([v, [{**v[0], "satisfied": None}]])
    >>> s["by_criterion"]["Says 4"]
    {'n': 2, 'judged': 1, 'pass_rate': 1.0, 'undecided': 1}
    >>> s["by_category"]["pitfall"]["pass_rate"]
    0.0
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def _add(table: dict[str, dict[str, Any]], key: str, passed: bool | None) -> None:
    entry = table.setdefault(key, {"n": 0, "judged": 0, "passed": 0, "undecided": 0})
    entry["n"] += 1
    if passed is None:
        entry["undecided"] += 1
    else:
        entry["judged"] += 1
        entry["passed"] += passed


def _rates(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        k: {"n": e["n"], "judged": e["judged"], "pass_rate": e["passed"] / e["judged"] if e["judged"] else None,
            "undecided": e["undecided"]}
        for k, e in table.items()
    }  # fmt: skip


def checklist_summary(verdicts: Iterable[Sequence[dict[str, Any]] | None], limit: int = 20) -> dict[str, Any]:
    """Per criterion (the ``limit`` most frequent) and per category: rows, judged, pass rate, undecided; and the
    criteria most often undecided. Empty when no row has verdicts."""
    by_criterion: dict[str, dict[str, Any]] = {}
    by_category: dict[str, dict[str, Any]] = {}
    rows = 0
    for row in verdicts:
        if not row:
            continue
        rows += 1
        for v in row:
            if not isinstance(v, dict):
                continue
            satisfied = v.get("satisfied")
            pitfall = v.get("category") == "pitfall"
            passed = None if satisfied is None else bool(satisfied) != pitfall
            _add(by_criterion, str(v.get("criterion")), passed)
            _add(by_category, str(v.get("category")), passed)
    if not rows:
        return {}
    ranked = sorted(by_criterion.items(), key=lambda kv: (-kv[1]["n"], kv[0]))[:limit]
    undecided = sorted(((k, e["undecided"]) for k, e in by_criterion.items() if e["undecided"]), key=lambda kv: -kv[1])
    return {
        "rows": rows,
        "by_criterion": _rates(dict(ranked)),
        "by_category": _rates(by_category),
        "most_undecided": undecided[:5],
    }
