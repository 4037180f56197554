"""Checklist rows in the reward path: a sample with a checklist is rewarded by its criteria (all judged in one
call), mapped onto the judge format's scale like a grade, with the batch's pass rates added."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from statistics import fmean
from typing import Any

from prom_reward.backends.sampling import SamplingOverrides
from prom_reward.checklist.judging import ajudge_checklists
from prom_reward.core.results import JudgeFailure
from prom_reward.rewards.config import RewardConfig, grade_range, normalize_value
from prom_reward.rewards.modes import MODE_FUNCTIONS, ModeCall, ModeOutput, assemble
from prom_reward.rewards.samples import RewardSample

CHECKLIST_MODES = ("absolute",)  # the reward modes that judge a checklist (per criterion, each response alone)


async def checklist_rewards(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    """One reward per resolved sample with a checklist (None with the failure behind it)."""
    cfg = call.cfg
    texts = [it.instruction or "" for it in items], [it.response for it in items]  # resolved: always text
    checklists, refs = [it.checklist for it in items], [it.reference_answer for it in items]
    batch = await ajudge_checklists(call.judge, *texts, checklists, cfg.checklist(), refs, **call.options())
    lo, hi = grade_range(call.judge.format)
    rewards: list[float | None] = []
    errors: list[JudgeFailure | None] = []
    for o in batch.outcomes:
        value = o.aggregate.value
        grade = None if value is None else lo + value * (hi - lo)
        rewards.append(normalize_value(grade, "grade", cfg.normalize, (lo, hi)))
        why = o.aggregate.reason or "the checklist could not be judged"
        errors.append(None if value is not None else JudgeFailure(o.error.kind if o.error else "output", why))
    known = [o.aggregate.value for o in batch.outcomes if o.aggregate.value is not None]
    metrics = {
        **batch.metrics,
        "abstain_rate": sum(r is None for r in rewards) / max(len(rewards), 1),
        "unique_items": batch.metrics.get("checklist_judgments", 0.0),
    }
    if known:
        metrics["mean_checklist_score"] = fmean(known)
    return ModeOutput(rewards, [o.feedback for o in batch.outcomes], metrics, errors=errors if any(errors) else [])


async def run_mode(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    """The config's mode for the samples without a checklist, ``checklist_rewards`` for those with one, merged in
    order."""
    listed = [i for i, it in enumerate(items) if it.checklist is not None]
    plain = [i for i, it in enumerate(items) if it.checklist is None]
    parts = [(listed, await checklist_rewards(call, [items[i] for i in listed]))] if listed else []
    if plain or not listed:
        parts.append((plain, await MODE_FUNCTIONS[call.cfg.mode](call, [items[i] for i in plain])))
    return parts[0][1] if len(parts) == 1 else assemble(len(items), parts)


def batch_runner(
    judge: Any, cfg: RewardConfig, samples: Sequence[Any], sampling: SamplingOverrides = None
) -> Callable[[Sequence[int], float | None], Awaitable[ModeOutput]]:
    """The judge call the outage loop makes for the samples at the given indices (``run_mode``), with its time
    (``judge_seconds``) and the change of a composite judge's counters (a cascade's routing) as metrics."""

    async def run(idx: Sequence[int], deadline: float | None) -> ModeOutput:
        before = dict(judge.stats.counters)
        start = time.perf_counter()
        out = await run_mode(ModeCall(judge, cfg, deadline, sampling), [samples[i] for i in idx])
        out.metrics = {**out.metrics, "judge_seconds": time.perf_counter() - start}
        out.metrics.update({k: float(v - before.get(k, 0)) for k, v in judge.stats.counters.items()})
        return out

    return run
