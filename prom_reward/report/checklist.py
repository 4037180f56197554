"""The report's checklist section: pass rates per criterion and per category, and the criteria the judge most
often could not decide, from a graded file's ``checklist_verdicts`` column."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def _rates(outcomes: dict[str, list[bool | None]]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, passed in outcomes.items():
        judged = [p for p in passed if p is not None]
        rate = sum(judged) / len(judged) if judged else None
        out[key] = {"n": len(passed), "judged": len(judged), "pass_rate": rate, "undecided": len(passed) - len(judged)}
    return out


def checklist_summary(verdicts: Iterable[Sequence[dict[str, Any]] | None], limit: int = 20) -> dict[str, Any]:
    """Per criterion (the ``limit`` most frequent) and per category: rows, judged, pass rate, undecided; and the
    criteria most often undecided. Empty when no row has verdicts."""
    by: dict[str, dict[str, list[bool | None]]] = {"criterion": {}, "category": {}}
    rows = 0
    for row in verdicts:
        rows += bool(row)
        for v in row or ():
            if isinstance(v, dict):
                satisfied = v.get("satisfied")  # a pitfall passes when avoided
                passed = None if satisfied is None else bool(satisfied) != (v.get("category") == "pitfall")
                for key in by:
                    by[key].setdefault(str(v.get(key)), []).append(passed)
    if not rows:
        return {}
    criteria = _rates(by["criterion"])
    ranked = sorted(criteria.items(), key=lambda kv: (-kv[1]["n"], kv[0]))[:limit]
    undecided = sorted(((k, e["undecided"]) for k, e in criteria.items() if e["undecided"]), key=lambda kv: -kv[1])
    return {
        "rows": rows,
        "by_criterion": dict(ranked),
        "by_category": _rates(by["category"]),
        "most_undecided": undecided[:5],
    }
