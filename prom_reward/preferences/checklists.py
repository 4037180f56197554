"""Preference pairs from checklist scores: a ``pairs`` row with a checklist scores each completion by its criteria
(one judge call per chunk), on the judge format's scale, for ``best_vs_worst`` only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.checklist.judging import ajudge_checklists
from prom_reward.core.protocol import Retry
from prom_reward.core.results import Grade, JudgeFailure
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.preferences.rows import PreferenceRow


def checklist_grades(
    judge: Any, rows: Sequence[PreferenceRow], cfg: PreferenceConfig, outage: Retry | None = None
) -> dict[int, list[Grade]]:
    """Each completion of each row with a checklist as a ``Grade`` (its aggregate on the judge's scale), by row
    index."""
    flat = [(r, k) for r in rows for k in range(len(r.responses))]
    if not flat:
        return {}
    batch = run_sync(
        lambda: ajudge_checklists(
            judge,
            [r.instruction for r, _ in flat],
            [r.responses[k] for r, k in flat],
            [r.checklist or () for r, _ in flat],
            cfg.checklist(),
            [r.reference_answer for r, _ in flat],
            outage=outage,
        )
    )
    lo, hi = judge.format.scale[0], judge.format.scale[-1]
    out: dict[int, list[Grade]] = {}
    for (r, _), o in zip(flat, batch.outcomes, strict=True):
        value, error = o.aggregate.value, o.error
        if error is not None and error.kind == "transport":
            value = None  # a criterion the transport failed: the row is judged again by a resume
        elif value is None:
            error = JudgeFailure("output", o.aggregate.reason or "the checklist could not be judged")
        else:
            error = None  # a non-essential criterion dropped: the aggregate stands
        score = None if value is None else lo + value * (hi - lo)
        failures = sum(s.score is None for s in o.criteria)
        out.setdefault(r.index, []).append(Grade(score, feedback=o.feedback, failures=failures, error=error))
    return out
