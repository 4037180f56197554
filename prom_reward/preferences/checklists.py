"""Preference pairs from checklist scores: a ``pairs`` row with a checklist scores each completion by its criteria
(one judge call per chunk), on the judge format's scale, for ``best_vs_worst`` only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.checklist.aggregate import ChecklistConfig
from prom_reward.checklist.criteria import Criterion
from prom_reward.checklist.judging import ChecklistOutcome, ajudge_checklists
from prom_reward.core.protocol import Retry
from prom_reward.core.results import Grade, JudgeFailure
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.preferences.rows import PreferenceRow


@dataclass(frozen=True)
class ChecklistItem:
    """One response to grade by its checklist."""

    instruction: str
    response: str
    reference_answer: str | None
    criteria: tuple[Criterion, ...]


def judge_checklist_items(
    judge: Any, items: Sequence[ChecklistItem], cfg: ChecklistConfig, outage: Retry | None = None
) -> list[tuple[ChecklistOutcome, float | None]]:
    """Each item's outcome, in one judge call, and its aggregate on the judge format's scale (None: undecided)."""
    columns = ([getattr(it, f.name) for it in items] for f in fields(ChecklistItem))  # in its fields' order
    instructions, responses, references, criteria = columns
    batch = run_sync(
        lambda: ajudge_checklists(judge, instructions, responses, criteria, cfg, references, outage=outage)
    )
    lo, hi = judge.format.scale[0], judge.format.scale[-1]
    return [(o, None if o.aggregate.value is None else lo + o.aggregate.value * (hi - lo)) for o in batch.outcomes]


def checklist_grades(
    judge: Any, rows: Sequence[PreferenceRow], cfg: PreferenceConfig, outage: Retry | None = None
) -> dict[int, list[Grade]]:
    """Each completion of each row with a checklist as a ``Grade`` (its aggregate on the judge's scale), by row
    index."""
    flat = [(r, k) for r in rows for k in range(len(r.responses))]
    if not flat:
        return {}
    items = [ChecklistItem(r.instruction, r.responses[k], r.reference_answer, r.checklist or ()) for r, k in flat]
    out: dict[int, list[Grade]] = {}
    for (r, _), (o, score) in zip(flat, judge_checklist_items(judge, items, cfg.checklist(), outage), strict=True):
        error = o.error
        if error is not None and error.kind == "transport":
            score = None  # a criterion the transport failed: the row is judged again by a resume
        elif score is None:
            error = JudgeFailure("output", o.aggregate.reason or "the checklist could not be judged")
        else:
            error = None  # a non-essential criterion dropped: the aggregate stands
        failures = sum(s.score is None for s in o.criteria)
        out.setdefault(r.index, []).append(Grade(score, feedback=o.feedback, failures=failures, error=error))
    return out
