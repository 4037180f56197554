"""Checklist diagnostics: pass rates per criterion and per category (every rate reads "higher is better"), under
the metric names listed in docs/checklists.md."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from prom_reward.checklist.criteria import CATEGORIES

CHECKLIST_KEYS = (
    "checklist_pass_rate",
    *(f"checklist_{c}_pass_rate" for c in CATEGORIES),
    "checklist_undecided_rate",
    "checklist_dropped_criteria",
    "checklist_judgments",
    "mean_checklist_score",
)
"""The checklist metrics with a fixed name, in the order frameworks stacking per-sample logs by key (OpenRLHF,
verl) log them; only TRL gets the per-criterion ``checklist/...`` names, which vary with the batch."""


def _rate(passed: list[bool]) -> float:
    return sum(passed) / len(passed)


def checklist_metrics(outcomes: Sequence[Any], grades: Sequence[Any]) -> dict[str, float]:
    """The batch's checklist metrics from its ``ChecklistOutcome``s and the distinct grades."""
    criteria = [s for o in outcomes for s in o.criteria]
    every: list[bool] = []  # the decided ones
    by_category: dict[str, list[bool]] = {}
    by_criterion: dict[str, list[bool]] = {}
    for s in criteria:
        if s.satisfied is not None:
            passed = s.satisfied != s.criterion.pitfall
            every.append(passed)
            by_category.setdefault(s.criterion.category, []).append(passed)
            key = "checklist/" + re.sub(r"\s+", "_", s.criterion.text.strip())[:48] + "_pass_rate"  # 48 characters
            by_criterion.setdefault(key, []).append(passed)
    out: dict[str, float] = {
        "checklist_judgments": float(len(grades)),
        "checklist_dropped_criteria": float(sum(o.aggregate.dropped for o in outcomes)),
        "judge_prompt_tokens": float(sum(g.prompt_tokens for g in grades)),
        "judge_completion_tokens": float(sum(g.completion_tokens for g in grades)),
    }
    if criteria:
        out["checklist_undecided_rate"] = (len(criteria) - len(every)) / len(criteria)
    if every:
        out["checklist_pass_rate"] = _rate(every)
    for category, passed in sorted(by_category.items()):
        out[f"checklist_{category}_pass_rate"] = _rate(passed)
    for key, passed in by_criterion.items():
        out[key] = _rate(passed)
    return out
