"""Judging a batch of (response, checklist) in one judge call: explicit (one judgment per distinct criterion) or
implicit (the whole checklist as one rubric); one outcome per response, a failure as a value; and the batch's pass
rates per criterion and per category (every rate reads "higher is better"; names in docs/checklists.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prom_reward.checklist.aggregate import Aggregate, ChecklistConfig, CriterionScore, aggregate
from prom_reward.checklist.criteria import CATEGORIES, Criterion, checklist_rubric, criterion_rubric
from prom_reward.core.judge import EXPECTED_LOGPROBS, asks_expected
from prom_reward.core.protocol import Retry
from prom_reward.core.results import Grade, JudgeFailure
from prom_reward.format.rubrics import Rubric


@dataclass(frozen=True)
class ChecklistOutcome:
    """One response's checklist judgment: the ``aggregate`` reward, each criterion's score (explicit mode), the
    judge's ``feedback`` (one line per criterion), and the ``error``: a criterion's transport failure (a job marks
    the row for ``--resume``), else the judge's failure behind a None aggregate."""

    aggregate: Aggregate
    criteria: tuple[CriterionScore, ...] = ()
    feedback: str | None = None
    error: JudgeFailure | None = None


@dataclass
class ChecklistBatch:
    """What ``ajudge_checklists`` returns: one outcome per response, in order, and the batch's ``metrics``."""

    outcomes: list[ChecklistOutcome]
    metrics: dict[str, float] = field(default_factory=dict)


def _judged(g: Grade, score: str, scale: tuple[int, ...]) -> tuple[float | None, float | None, str | None]:
    """A grade's score (``score``: which) on its format's scale, on [0, 1], and why there is none."""
    raw = g.value(score)
    if raw is not None:
        return raw, (raw - scale[0]) / (scale[-1] - scale[0]), None
    if g.error is not None:
        return None, None, g.error.reason
    why = g.expected_reason if g.ok and g.expected_reason else "the judge gave no parseable verdict after its retries"
    return None, None, why


async def ajudge_checklists(
    judge: Any,
    instructions: Sequence[str],
    responses: Sequence[str],
    checklists: Sequence[Sequence[Criterion]],
    cfg: ChecklistConfig,
    references: Sequence[str | None] | None = None,
    *,
    truncate_response: bool | None = None,
    deadline: float | None = None,
    outage: Retry | None = None,
) -> ChecklistBatch:
    """Each response judged against its checklist (``cfg.mode``) in one ``judge.agrade`` call.

    >>> from prom_reward import PrometheusJudge
    >>> import asyncio
    >>> from prom_reward.checklist.criteria import parse_checklist
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Yes. [RESULT] 5", "No. [RESULT] 1"])
    >>> lists = [parse_checklist(["Says 4", "Shows work"])]
    >>> out = asyncio.run(ajudge_checklists(judge, ["2+2?"], ["4"], lists, ChecklistConfig()))
    >>> out.outcomes[0].aggregate.value, [c.satisfied for c in out.outcomes[0].criteria]
    (0.5, [True, False])
    """
    fmt, implicit = judge.format, cfg.mode == "implicit"
    refs = list(references) if references is not None else [None] * len(responses)
    asks: list[tuple[str, str, Rubric, str | None]] = []
    owner: list[int] = []
    for i, (ins, resp, cl, ref) in enumerate(zip(instructions, responses, checklists, refs, strict=True)):
        for rubric in [checklist_rubric(cl, fmt)] if implicit else [criterion_rubric(c, fmt) for c in cl]:
            asks.append((ins, resp, rubric, ref))
            owner.append(i)
    seen: dict[tuple[str, str, Rubric, str | None], int] = {}  # one judgment per distinct ask
    where = [seen.setdefault(a, len(seen)) for a in asks]
    grades: list[Grade] = []
    if seen:
        columns = [list(column) for column in zip(*seen, strict=True)]  # instructions, responses, rubrics, refs
        grades = await judge.agrade(
            *columns[:3],
            columns[3] if any(r is not None for r in columns[3]) else None,
            num_samples=cfg.num_samples if cfg.score == "mean" else 1,
            sampling={"logprobs": EXPECTED_LOGPROBS} if cfg.score == "expected" and not asks_expected(judge) else None,
            truncate_response=truncate_response,
            deadline=deadline,
            outage=outage,
        )
    results = [(grades[w], *_judged(grades[w], cfg.score, fmt.scale)) for w in where]
    if implicit:
        outcomes = [
            ChecklistOutcome(Aggregate(unit, why), (), g.feedback, None if why is None else g.error)
            for g, _, unit, why in results
        ]
        return ChecklistBatch(outcomes, checklist_metrics(outcomes, grades))
    per: list[list[tuple[CriterionScore, Grade]]] = [[] for _ in responses]
    flat = [c for cl in checklists for c in cl]
    for c, i, (g, raw, unit, why) in zip(flat, owner, results, strict=True):
        per[i].append((CriterionScore(c, unit, why, raw), g))
    outcomes = []
    for judged in per:
        scores = tuple(s for s, _ in judged)
        agg = aggregate(scores, cfg.aggregation)
        failed = [g.error for s, g in judged if s.score is None and g.error is not None]
        transport = next((e for e in failed if e.kind == "transport"), None)
        error = transport or (failed[0] if failed and agg.value is None else None)
        outcomes.append(ChecklistOutcome(agg, scores, _feedback(judged), error))
    return ChecklistBatch(outcomes, checklist_metrics(outcomes, grades))


def _feedback(judged: list[tuple[CriterionScore, Grade]]) -> str | None:
    """One line per criterion: its number, whether it holds, and the judge's feedback."""
    lines = []
    for k, (s, g) in enumerate(judged):
        state = "undecided" if s.satisfied is None else ("fell into" if s.criterion.pitfall else "satisfied")
        if s.satisfied is False:
            state = "avoided" if s.criterion.pitfall else "not satisfied"
        lines.append(f"[{k}] {state}: {g.feedback or s.reason or ''}".rstrip())
    return "\n".join(lines) if lines else None


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
