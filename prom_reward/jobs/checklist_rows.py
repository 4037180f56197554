"""Checklist rows of a ``grade`` job: graded per criterion in one judge call with the batch's other checklist rows
and aggregated; its output columns are in docs/jobs.md."""

from __future__ import annotations

from typing import Any

from prom_reward.checklist.config import ChecklistConfig
from prom_reward.core.protocol import Retry
from prom_reward.preferences.checklists import ChecklistItem, judge_checklist_items

VERDICT_TYPES = {
    "criterion": "string",
    "category": "string",
    "weight": "float64",
    "score": "float64",
    "satisfied": "bool_",
    "error": "string",
}
"""The fields of a ``checklist_verdicts`` entry, in order, and their pyarrow types."""


def verdicts_type() -> Any:
    """The pyarrow type of ``checklist_verdicts``."""
    import pyarrow as pa

    return pa.list_(pa.struct([(k, getattr(pa, t)()) for k, t in VERDICT_TYPES.items()]))


def judge_checklist_rows(
    judge: Any, items: list[ChecklistItem], cfg: ChecklistConfig, outage: Retry | None = None
) -> list[dict[str, Any]]:
    """The result columns of each checklist row, and its judge failure under ``_error``."""
    out = []
    for o, score in judge_checklist_items(judge, items, cfg, outage):
        undecided = [s for s in o.criteria if s.score is None]
        down = score is None and o.error is not None and o.error.kind == "transport"  # --resume judges it again
        out.append(
            {
                "score": score,
                "feedback": o.feedback,
                "expected_score": None,
                "probabilities": None,
                "judge_failures": len(undecided) if o.criteria else int(score is None),
                "judge_retries": 0,
                "forced_verdicts": 0,
                "judge_error": f"backend failed: {o.aggregate.reason}" if down else o.aggregate.reason,
                "checklist_score": o.aggregate.value,
                "checklist_verdicts": [
                    {
                        "criterion": s.criterion.text,
                        "category": s.criterion.category,
                        "weight": s.criterion.weight,
                        "score": s.raw,
                        "satisfied": s.satisfied,
                        "error": s.reason,
                    }
                    for s in o.criteria
                ],
                "_error": o.error,
            }
        )
    return out
