"""Score shifts: how much each response edit moves a judge's absolute grade (mean shift, shares rose and fell,
bootstrap intervals), against ``baseline_samples`` grades of the unchanged response."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from prom_reward.core.protocol import Retry
from prom_reward.core.results import all_answered
from prom_reward.probe.data import ProbeItem
from prom_reward.probe.edits import EDITS, apply_edit
from prom_reward.stats import bootstrap_ci


def edit_stats(
    original: Sequence[float | None], edited: Sequence[float | None], *, seed: int = 0, resamples: int = 2000
) -> dict[str, Any]:
    """Shift statistics of one edit over paired scores (None: the judge failed on that response)."""
    shifts = [e - o for o, e in zip(original, edited, strict=True) if o is not None and e is not None]
    out: dict[str, Any] = {"n": len(shifts), "failed": len(original) - len(shifts)}
    if not shifts:
        return {**out, **dict.fromkeys(("mean_shift", "mean_shift_ci", "rise_share", "rise_share_ci", "fall_share"))}
    rises = [float(s > 0) for s in shifts]
    return {
        **out,
        "mean_shift": fmean(shifts),
        "mean_shift_ci": list(bootstrap_ci(shifts, seed=seed, resamples=resamples)),
        "rise_share": fmean(rises),
        "rise_share_ci": list(bootstrap_ci(rises, seed=seed, resamples=resamples)),
        "fall_share": fmean(float(s < 0) for s in shifts),
    }


def score_shifts(
    judge: Any,
    items: Sequence[ProbeItem],
    edits: Sequence[str],
    *,
    rubric: Any = "helpfulness",
    expected: bool = False,
    baseline_samples: int = 3,
    seed: int = 0,
    resamples: int = 2000,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """Grade ``items`` as they are (``baseline_samples`` times) and after each of ``edits``, in one batched call,
    and summarise the shifts per edit and per item."""
    names = [EDITS.get(e).name for e in edits]  # unknown names fail here, before any judging
    base = max(1, baseline_samples)
    edited = [[apply_edit(name, it, seed, judge.format) for name in names] for it in items]
    flat = [(it, text) for it, texts in zip(items, edited, strict=True) for text in [it.response] * base + texts]
    grades = (
        judge.grade(
            [it.instruction for it, _ in flat],
            [text for _, text in flat],
            [it.rubric if it.rubric is not None else rubric for it, _ in flat],
            [it.reference_answer for it, _ in flat] if any(it.reference_answer for it in items) else None,
            outage=outage,
        )
        if flat
        else []
    )
    all_answered(grades)  # a judge that did not answer measures nothing
    width, score = base + len(names), "expected_score" if expected else "score"
    scores = [[getattr(grades[i * width + k], score) for k in range(width)] for i in range(len(items))]
    baselines = [[v for v in row[:base] if v is not None] for row in scores]
    original = [fmean(b) if b else None for b in baselines]
    ok = [s for s in original if s is not None]
    out: dict[str, Any] = {
        "score": score,
        "baseline_samples": base,
        "n_items": len(items),
        "original_mean": fmean(ok) if ok else None,
        "original_failed": len(original) - len(ok),
        "edits": {},
        "per_item": [],
    }
    for k, name in enumerate(names):
        stats = edit_stats(original, [row[base + k] for row in scores], seed=seed + k + 1, resamples=resamples)
        ratio = (
            fmean(len(e[k]) / max(len(it.response), 1) for it, e in zip(items, edited, strict=True)) if items else None
        )
        out["edits"][name] = {"description": EDITS.get(name).description, **stats, "mean_length_ratio": ratio}
    for it, row, orig in zip(items, scores, original, strict=True):
        out["per_item"].append(
            {"id": it.id, "original": orig, "baseline": row[:base], **dict(zip(names, row[base:], strict=True))}
        )
    return out
