"""The two ways of turning judge verdicts on one chunk of rows into preference pairs: ``best_vs_worst`` (grades,
ties re-judged by ``compare_by_grades``; a row with a checklist scored by its criteria, one judge call per chunk)
and ``all_pairs`` (swapped comparisons); rules in docs/design-notes.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from itertools import combinations
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.checklist.aggregate import ChecklistConfig
from prom_reward.checklist.criteria import Criterion
from prom_reward.checklist.judging import ChecklistOutcome, ajudge_checklists
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.protocol import Judge, Retry
from prom_reward.core.results import Grade, JudgeFailure, Verdict, tie_reason
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


@dataclass
class ChunkOutcome:
    """What one chunk produced: pair rows and skip records (``skip``), in input order."""

    min_margin: float = 0.0
    """A pair with a smaller margin is skipped (``below_min_margin``)."""
    pairs: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    tie_breaks: int = 0
    """Rows whose all-equal grades were sent to ``compare_by_grades``."""
    tie_rounds: int = 0
    """Temperature-1.0 re-grading rounds used by those tie breaks."""

    def pair(self, row: PreferenceRow, chosen: int, rejected: int, scores: tuple[float, float], **extra: Any) -> None:
        """The pair of ``row``'s completion ``chosen`` over ``rejected`` with their ``scores``, or its skip."""
        if scores[0] - scores[1] < self.min_margin:
            return self.skip(row, "below_min_margin", (chosen, rejected))
        self.pairs.append(
            {
                "source_index": row.index,
                "prompt": row.prompt,
                "chosen": row.completions[chosen],
                "rejected": row.completions[rejected],
                "score_chosen": scores[0],
                "score_rejected": scores[1],
                "margin": scores[0] - scores[1],
                "chosen_index": chosen,
                "rejected_index": rejected,
                **extra,
                **row.extra,
            }
        )

    def graded(self, row: PreferenceRow, hi: int, lo: int, grades: tuple[Grade, Grade], rounds: int) -> None:
        """The pair of completion ``hi`` over ``lo`` by their ``grades``."""
        g_hi, g_lo = grades
        assert g_hi.score is not None and g_lo.score is not None  # only decided grades are paired
        extra = {"feedback_chosen": g_hi.feedback, "feedback_rejected": g_lo.feedback, "tie_rounds": rounds}
        self.pair(row, hi, lo, (g_hi.score, g_lo.score), **extra)

    def skip(self, row: PreferenceRow, reason: str, pair: tuple[int, int] | None, error: str | None = None) -> None:
        """Record one dropped candidate pair: ``source_index``, ``reason``, ``pair`` (None: the whole row),
        ``judge_error``."""
        which = None if pair is None else sorted(pair)
        self.skipped.append({"source_index": row.index, "reason": reason, "pair": which, "judge_error": error})


def _undecided(v: Verdict) -> str:
    return tie_reason(v.swap_agreement) if v.tie else "judge_failed"


def best_vs_worst(
    judge: Judge, rows: Sequence[PreferenceRow], cfg: PreferenceConfig, outage: Retry | None = None
) -> ChunkOutcome:
    """Pairs from absolute grades (see the module docstring)."""
    flat = [(r, k) for r in rows if r.checklist is None for k in range(len(r.responses))]
    items = [GradeItem(r.instruction, r.responses[k], r.rubric, r.reference_answer) for r, k in flat]
    grades = judge.grade_items(items, num_samples=cfg.num_samples, outage=outage) if flat else []
    per_row = checklist_grades(judge, [r for r in rows if r.checklist is not None], cfg, outage)  # by checklists
    for (r, _), g in zip(flat, grades, strict=True):
        per_row.setdefault(r.index, []).append(g)
    ok = {r.index: all(g.ok for g in per_row[r.index]) for r in rows}
    equal = {r.index: ok[r.index] and len({g.score for g in per_row[r.index]}) == 1 for r in rows}
    tied = [r for r in rows if equal[r.index] and r.checklist is None]  # a checklist's tie is not broken by a rubric
    verdicts: dict[int, Verdict] = {}
    if tied:
        pairs = [PairItem(r.instruction, r.responses[0], r.responses[1], r.rubric, r.reference_answer) for r in tied]
        vs = judge.compare_items_by_grades(
            pairs, max_tie_rounds=cfg.max_tie_rounds, num_samples=cfg.num_samples, outage=outage
        )
        verdicts = {r.index: v for r, v in zip(tied, vs, strict=True)}
    out = ChunkOutcome(cfg.min_margin, tie_breaks=len(tied), tie_rounds=sum(v.tie_rounds for v in verdicts.values()))
    for r in rows:
        gs, v = per_row[r.index], verdicts.get(r.index)
        down = next((g.error for g in gs if not g.ok and g.error is not None and g.error.kind == "transport"), None)
        if down is not None:
            out.skip(r, "backend_failed", None, f"backend failed: {down.reason}")
        elif not ok[r.index]:  # judge_error: the first failed completion's
            k, bad = next((k, g) for k, g in enumerate(gs) if not g.ok)
            out.skip(r, "judge_failed", None, f"completion {k}: {bad.error.reason}" if bad.error else None)
        elif v is not None and v.winner is None:
            out.skip(r, _undecided(v), (0, 1), None if v.tie else v.reason)
        elif v is not None:
            a, b = v.grades  # type: ignore[misc]
            out.graded(r, *((0, 1, (a, b)) if v.winner == "A" else (1, 0, (b, a))), v.tie_rounds)
        elif equal[r.index]:
            out.skip(r, "tie", (0, 1))
        else:
            scores = [g.score for g in gs]
            hi, lo = scores.index(max(scores)), scores.index(min(scores))  # type: ignore[type-var]
            out.graded(r, hi, lo, (gs[hi], gs[lo]), 0)
    return out


def all_pairs(
    judge: Judge, rows: Sequence[PreferenceRow], cfg: PreferenceConfig, outage: Retry | None = None
) -> ChunkOutcome:
    """Pairs from pairwise verdicts (see the module docstring)."""
    flat = [(r, i, j) for r in rows for i, j in combinations(range(len(r.responses)), 2)]
    items = [PairItem(r.instruction, r.responses[i], r.responses[j], r.rubric, r.reference_answer) for r, i, j in flat]
    verdicts = judge.compare_items(items, swap=cfg.swap, num_samples=cfg.num_samples, outage=outage)
    out = ChunkOutcome(cfg.min_margin)
    down: set[int] = set()  # rows with a pair the transport failed: the whole row is judged again on resume
    for (r, _, _), v in zip(flat, verdicts, strict=True):
        if v.error is not None and v.error.kind == "transport" and r.index not in down:
            down.add(r.index)
            out.skip(r, "backend_failed", None, f"backend failed: {v.error.reason}")
    for (r, i, j), v in zip(flat, verdicts, strict=True):
        if r.index in down:
            continue
        if v.winner is None or v.p_a is None:
            why = _undecided(v)
            out.skip(r, why, (i, j), v.reason if why == "judge_failed" else None)
            continue
        chosen, rejected, p = (i, j, v.p_a) if v.winner == "A" else (j, i, 1.0 - v.p_a)
        out.pair(r, chosen, rejected, (p, 1.0 - p), feedback=v.feedback, swap_agreement=v.swap_agreement)
    return out


def judge_chunk(
    judge: Judge, rows: Sequence[PreferenceRow], cfg: PreferenceConfig, outage: Retry | None = None
) -> ChunkOutcome:
    """Run the configured strategy on one chunk of validated rows (fewer than two completions: skipped as
    ``too_few_completions`` unjudged) under the job's ``outage`` policy."""
    few = [r for r in rows if len(r.responses) < 2]
    rows = [r for r in rows if len(r.responses) >= 2]
    strategy = best_vs_worst if cfg.strategy == "best_vs_worst" else all_pairs
    out = strategy(judge, rows, cfg, outage) if rows else ChunkOutcome(cfg.min_margin)
    for r in few:
        out.skip(
            r, "too_few_completions", None, f"{len(r.responses)} completion(s): a preference pair needs at least 2"
        )
    return out
