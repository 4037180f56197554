"""``grade`` jobs: an absolute grade per row of instruction and response, on the judge format's scale (a row with a
checklist: per criterion, in one judge call with the batch's others, aggregated); ``compare`` jobs: a pairwise verdict
(A or B, both orders judged with ``swap``) per row of instruction and two responses, a tie decided without a winner, a
failure never given a made-up one. Columns: docs/jobs.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from prom_reward.checklist.aggregate import ChecklistConfig, checklist_config
from prom_reward.checklist.criteria import parse_checklist
from prom_reward.core.combine import no_verdict
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.judge import asks_expected
from prom_reward.core.protocol import Retry
from prom_reward.core.results import Grade, JudgeFailure, Verdict, tie_reason
from prom_reward.errors import InputError
from prom_reward.format.judge_format import JudgeFormat, Task
from prom_reward.format.rubrics import NO_RUBRIC
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import BatchOut, JobKind, Prepare, failure_text, resolved, resolver
from prom_reward.preferences.strategies import ChecklistItem, judge_checklist_items

SCORES = ("1", "2", "3", "4", "5")
"""The probabilities' keys of a job whose judge format is not known yet (Prometheus 2's scale)."""
RESULT_TYPES = {
    "score": "float64",
    "feedback": "string",
    "expected_score": "float64",
    "probabilities": "struct",
    "judge_failures": "int64",
    "judge_retries": "int64",
    "forced_verdicts": "int64",
    "judge_error": "string",
    "checklist_score": "float64",
    "checklist_verdicts": "list_",
}
"""The result columns of a ``grade`` row, in order, and their pyarrow types (the nested ones: ``result_schema``)."""
VERDICT_TYPES = {
    "criterion": "string",
    "category": "string",
    "weight": "float64",
    "score": "float64",
    "satisfied": "bool_",
    "error": "string",
}
"""The fields of a ``checklist_verdicts`` entry, in order, and their pyarrow types."""


@dataclass(frozen=True)
class GradeJob(JobKind):
    """Options of a ``grade`` job (validated; the rubric is resolved once, here)."""

    name: ClassVar[str] = "grade"
    result_types: ClassVar[dict[str, str]] = RESULT_TYPES

    rubric: Any = None
    """One rubric for every row (a built-in name, a .json/.yaml file, a dict, a ``Rubric``); None: each row's
    ``rubric_column``."""
    instruction_column: str | None = None
    """The instruction; None: ``instruction``, else TRL's ``prompt`` (a row with both is refused)."""
    response_column: str | None = None
    """The response; None: ``response``, else TRL's ``completion`` (a row with both is refused)."""
    reference_column: str = "reference_answer"
    """Optional: a reference answer (str or null)."""
    rubric_column: str = "rubric"
    """A per-row rubric, read where ``rubric`` is None."""
    checklist_column: str = "checklist"
    """Optional: a per-row checklist (that row is graded per criterion, docs/checklists.md)."""
    checklist_mode: str = "explicit"
    """Checklist rows: ``explicit`` (one judgment per criterion, aggregated) or ``implicit`` (one judgment)."""
    checklist_aggregation: Any = "weighted_mean"
    """Checklist rows: ``weighted_mean``, ``minimum``, ``gate`` or a callable (docs/checklists.md)."""
    scores: tuple[str, ...] = dataclasses.field(default=SCORES, init=False, repr=False)
    """The keys of ``probabilities``: the judge format's scale (set by ``for_format``, not an option)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rubric", resolved(self.rubric))  # sent resolved (to Ray's actors)
        self.checklist()  # validated here (ConfigError naming the setting)

    def checklist(self, score: str = "sample") -> ChecklistConfig:
        """How checklist rows are judged."""
        return checklist_config(self.checklist_mode, self.checklist_aggregation, score)

    def task(self) -> Task:
        return "absolute"

    def for_format(self, fmt: JudgeFormat) -> GradeJob:
        job: GradeJob = super().for_format(fmt)
        object.__setattr__(job, "scores", fmt.verdict_labels("absolute"))
        return job

    def preparer(self) -> Prepare:
        rubrics = resolver(self.rubric)

        def prepare(row: SourceRow) -> GradeItem | ChecklistItem:
            names = row.columns(self, ("instruction_column", "response_column"))
            listed = row.column(self.checklist_column, "checklist_column", required=False)
            if listed is None or row.data[listed] is None:
                # the judge checks the rubric against its format (grade_items): a misfit fails the row
                return row.item(names, GradeItem, row.rubric(rubrics, self.rubric_column))
            texts = row.item(names, GradeItem, NO_RUBRIC)  # the texts checked as a plain row's
            try:
                criteria = parse_checklist(row.data[self.checklist_column])
            except InputError as e:
                raise row.error(self.checklist_column, "checklist_column", str(e)) from None
            return ChecklistItem(texts.instruction, texts.response, texts.reference_answer, criteria)

        return prepare

    def result_schema(self, nested: dict[str, Any] | None = None) -> Any:
        import pyarrow as pa

        verdict = pa.struct([(k, getattr(pa, t)()) for k, t in VERDICT_TYPES.items()])
        scores = pa.struct([(k, pa.float64()) for k in self.scores])
        return super().result_schema({"probabilities": scores, "checklist_verdicts": pa.list_(verdict)})

    def judge_items(self, judge: Any, rows: list[SourceRow], items: list[Any], outage: Retry | None = None) -> BatchOut:
        listed = [i for i, it in enumerate(items) if isinstance(it, ChecklistItem)]
        plain = [i for i, it in enumerate(items) if not isinstance(it, ChecklistItem)]
        cfg = self.checklist("expected" if asks_expected(judge) else "sample")
        checked = judge_checklist_items(judge, [items[i] for i in listed], cfg, outage) if listed else []
        graded = judge.grade_items([items[i] for i in plain], outage=outage) if plain else []
        out = self._grade_rows(judge, [rows[i] for i in plain], graded)
        if not listed:
            return out
        by_row = dict(zip(plain, out.rows, strict=True))
        for i, (o, score) in zip(listed, checked, strict=True):
            down = score is None and o.error is not None and o.error.kind == "transport"  # --resume judges it again
            out.count(score is not None, o.error)
            verdicts: list[dict[str, Any]] = []
            for s in o.criteria:  # in VERDICT_TYPES' order
                values = (s.criterion.text, s.criterion.category, s.criterion.weight, s.raw, s.satisfied, s.reason)
                verdicts.append(dict(zip(VERDICT_TYPES, values, strict=True)))
            result = {
                "score": score,
                "feedback": o.feedback,
                "judge_failures": sum(s.score is None for s in o.criteria) if o.criteria else int(score is None),
                "judge_error": f"backend failed: {o.aggregate.reason}" if down else o.aggregate.reason,
                "checklist_score": o.aggregate.value,
                "checklist_verdicts": verdicts,
            }
            by_row[i] = self.output_row(rows[i], _result(result))
        out.rows = [by_row[i] for i in range(len(rows))]
        return out

    def _grade_rows(self, judge: Any, rows: list[SourceRow], grades: list[Grade]) -> BatchOut:
        """The output rows of graded rows, one ``Grade`` each."""
        out = BatchOut()
        # the expected-score columns only when asked for (--expected: the judge asks for the verdict's
        # logprobs), so the rows agree with the job record; a forced verdict alone does not fill them
        asked = asks_expected(judge)
        for row, g in zip(rows, grades, strict=True):
            error = None if g.score is not None else failure_text(g.error) or no_verdict(g.failures, g.samples)
            out.count(g.score is not None, g.error)
            if asked and g.score is not None and g.expected_score is None and g.expected_reason:
                out.no_expected[g.expected_reason] = out.no_expected.get(g.expected_reason, 0) + 1
            dist = g.probabilities if asked else None
            result = {
                **self.judgment_columns(g),
                "score": g.score,
                "expected_score": g.expected_score if asked else None,
                "probabilities": None if not dist else {k: float(dist.get(int(k), 0.0)) for k in self.scores},
                "judge_error": error,
            }
            out.rows.append(self.output_row(row, _result(result)))
        return out

    def failed_rows(self, judge: Any, rows: list[SourceRow], items: list[Any], failure: JudgeFailure) -> BatchOut:
        failed = Grade(None, failures=judge.capabilities.num_samples, error=failure)
        return self._grade_rows(judge, rows, [failed] * len(rows))


def _result(given: dict[str, Any]) -> dict[str, Any]:
    """Every result column in order: ``given``'s, the counts not given 0, the rest null."""
    counts = {"judge_retries": 0, "forced_verdicts": 0}
    return {k: given.get(k, counts.get(k)) for k in RESULT_TYPES}


COMPARE_TYPES = {
    "winner": "string",
    "p_a": "float64",
    "tie": "bool_",
    "swap_agreement": "bool_",
    "feedback": "string",
    "judge_failures": "int64",
    "judge_retries": "int64",
    "forced_verdicts": "int64",
    "judge_error": "string",
}
"""The result columns of a ``compare`` row, in order, and their pyarrow types."""


@dataclass(frozen=True)
class CompareJob(JobKind):
    """Options of a ``compare`` job (validated; the rubric is resolved once, here)."""

    name: ClassVar[str] = "compare"
    result_types: ClassVar[dict[str, str]] = COMPARE_TYPES

    rubric: Any = None
    """One rubric for every row; None: each row's ``rubric_column``."""
    swap: bool = True
    """Judge both orders; a winner only where they agree (else a tie)."""
    instruction_column: str | None = None
    """The instruction; None: ``instruction``, else TRL's ``prompt`` (a row with both is refused)."""
    response_a_column: str | None = None
    """Response A; None: ``response_a``, else TRL's ``chosen`` (a row with both is refused)."""
    response_b_column: str | None = None
    """Response B; None: ``response_b``, else TRL's ``rejected`` (a row with both is refused)."""
    reference_column: str = "reference_answer"
    """Optional: a reference answer (str or null)."""
    rubric_column: str = "rubric"
    """A per-row rubric, read where ``rubric`` is None."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rubric", resolved(self.rubric))
        object.__setattr__(self, "swap", bool(self.swap))

    def task(self) -> Task:
        return "relative"

    def preparer(self) -> Prepare:
        rubrics = resolver(self.rubric)

        def prepare(row: SourceRow) -> PairItem:
            names = row.columns(self, ("instruction_column", "response_a_column", "response_b_column"))
            # the judge checks the rubric against its format (compare_items): a misfit fails the row
            return row.item(names, PairItem, row.rubric(rubrics, self.rubric_column))

        return prepare

    def judge_items(self, judge: Any, rows: list[SourceRow], items: list[Any], outage: Retry | None = None) -> BatchOut:
        return self._verdict_rows(rows, judge.compare_items(items, swap=self.swap, outage=outage))

    def failed_rows(self, judge: Any, rows: list[SourceRow], items: list[Any], failure: JudgeFailure) -> BatchOut:
        failed = Verdict(None, failures=judge.capabilities.num_samples * (2 if self.swap else 1), error=failure)
        return self._verdict_rows(rows, [failed] * len(rows))

    def _verdict_rows(self, rows: list[SourceRow], verdicts: list[Verdict]) -> BatchOut:
        """The output rows of judged rows, one ``Verdict`` each."""
        out = BatchOut()
        for row, v in zip(rows, verdicts, strict=True):
            out.count(v.winner is not None, v.error, tie_reason(v.swap_agreement) if v.tie else None)
            result = {"winner": v.winner, "p_a": v.p_a, "tie": bool(v.tie), "swap_agreement": v.swap_agreement}
            error = failure_text(v.error) or v.reason
            out.rows.append(self.output_row(row, {**result, **self.judgment_columns(v), "judge_error": error}))
        return out
