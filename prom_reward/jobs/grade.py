"""``grade`` jobs: an absolute grade per row of instruction and response, on the judge format's scale (a row with a
checklist: per criterion, in one judge call with the batch's others, aggregated); columns in docs/jobs.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from prom_reward.checklist.config import ChecklistConfig, checklist_config
from prom_reward.checklist.criteria import parse_checklist
from prom_reward.core.combine import no_verdict
from prom_reward.core.items import GradeItem
from prom_reward.core.judge import asks_expected
from prom_reward.core.protocol import Retry
from prom_reward.core.results import Grade, JudgeFailure
from prom_reward.errors import InputError
from prom_reward.format.judge_format import JudgeFormat, Task
from prom_reward.format.resolve import RubricResolver
from prom_reward.format.rubrics import NO_RUBRIC, Rubric
from prom_reward.jobs.columns import column, role_columns, text_item
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import BatchOut, JobKind, Prepare, failure_text, row_error
from prom_reward.preferences.checklists import ChecklistItem, judge_checklist_items

SCORES = ("1", "2", "3", "4", "5")
"""The probabilities' keys of a job whose judge format is not known yet (Prometheus 2's scale)."""


def resolver(rubric: Any) -> RubricResolver:
    """The ``RubricResolver`` of a job: ``rubric`` for every row, else each row's rubric column."""
    return RubricResolver(
        rubric,
        what="row",
        missing_hint="fix: pass {rubric} NAME|FILE, or name the column with {rubric_column}",
    )


def resolve_rubric(rubrics: RubricResolver, row: SourceRow, given: str) -> Rubric:
    """The rubric of one row (its ``rubric_column`` ``given``, else the job's), errors naming the row's place."""
    name = column(row, given, "rubric_column", required=False)
    field = name or given
    try:
        return rubrics(None if name is None else row.data[name], index=row.id, field=field)
    except InputError as e:
        raise e.at(row.where) from None


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


@dataclass(frozen=True)
class GradeJob(JobKind):
    """Options of a ``grade`` job (validated; the rubric is resolved once, here)."""

    name: ClassVar[str] = "grade"
    result_columns: ClassVar[tuple[str, ...]] = tuple(RESULT_TYPES)
    columns: ClassVar[dict[str, bool]] = {
        "instruction_column": True,
        "response_column": True,
        "reference_column": False,
        "rubric_column": False,
        "checklist_column": False,
    }

    rubric: Any = None
    """One rubric for every row (a built-in name, a .json/.yaml file, a dict, a ``Rubric``); None: each row's
    ``rubric_column``."""
    instruction_column: str | None = None
    """Input column with the instruction; None: ``instruction``, else TRL's ``prompt`` (a row with both is
    refused)."""
    response_column: str | None = None
    """Input column with the response to grade; None: ``response``, else TRL's ``completion`` (a row with both
    is refused)."""
    reference_column: str = "reference_answer"
    """Optional input column with a reference answer (str or null)."""
    rubric_column: str = "rubric"
    """Input column with a per-row rubric, read where ``rubric`` is None."""
    checklist_column: str = "checklist"
    """Input column with a per-row checklist (used where a row has one: graded per criterion, docs/checklists.md)."""
    checklist_mode: str = "explicit"
    """Checklist rows: ``explicit`` (one judgment per criterion, aggregated) or ``implicit`` (one judgment)."""
    checklist_aggregation: Any = "weighted_mean"
    """Checklist rows: ``weighted_mean``, ``minimum``, ``gate`` or a callable (docs/checklists.md)."""
    scores: tuple[str, ...] = dataclasses.field(default=SCORES, init=False, repr=False)
    """The keys of ``probabilities``: the judge format's scale (set by ``for_format``, not an option)."""

    def __post_init__(self) -> None:
        if self.rubric is not None and not isinstance(self.rubric, Rubric):  # resolved here, sent resolved
            object.__setattr__(self, "rubric", resolver(self.rubric).default)
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
            names = role_columns(row, self, ("instruction_column", "response_column"))
            listed = column(row, self.checklist_column, "checklist_column", required=False)
            if listed is None or row.data[listed] is None:
                # the judge checks the rubric against its format (grade_items): a misfit fails the row
                return text_item(row, names, GradeItem, resolve_rubric(rubrics, row, self.rubric_column))
            texts = text_item(row, names, GradeItem, NO_RUBRIC)  # the texts checked as a plain row's
            try:
                criteria = parse_checklist(row.data[self.checklist_column])
            except InputError as e:
                raise row_error(row, self.checklist_column, "checklist_column", str(e)) from None
            return ChecklistItem(texts.instruction, texts.response, texts.reference_answer, criteria)

        return prepare

    def result_schema(self) -> Any:
        import pyarrow as pa

        nested = {
            "probabilities": pa.struct([(k, pa.float64()) for k in self.scores]),
            "checklist_verdicts": verdicts_type(),
        }
        return pa.schema([(k, nested[k] if k in nested else getattr(pa, t)()) for k, t in RESULT_TYPES.items()])

    def judge_items(self, judge: Any, rows: list[SourceRow], items: list[Any], outage: Retry | None = None) -> BatchOut:
        listed = [i for i, it in enumerate(items) if isinstance(it, ChecklistItem)]
        if not listed:
            return self._grade_rows(judge, rows, judge.grade_items(items, outage=outage))
        plain = [i for i, it in enumerate(items) if not isinstance(it, ChecklistItem)]
        asked = asks_expected(judge)
        results = judge_checklist_rows(
            judge, [items[i] for i in listed], self.checklist("expected" if asked else "sample"), outage
        )
        graded = judge.grade_items([items[i] for i in plain], outage=outage) if plain else []
        out = self._grade_rows(judge, [rows[i] for i in plain], graded)
        by_row = dict(zip(plain, out.rows, strict=True))
        for i, result in zip(listed, results, strict=True):
            error = result.pop("_error")
            out.count(result["score"] is not None, error)
            by_row[i] = self.output_row(rows[i], {k: result[k] for k in self.result_columns})
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
            probs = None if not dist else {k: float(dist.get(int(k), 0.0)) for k in self.scores}
            out.rows.append(
                self.output_row(
                    row,
                    {
                        "score": g.score,
                        "feedback": g.feedback,
                        "expected_score": g.expected_score if asked else None,
                        "probabilities": probs,
                        "judge_failures": g.failures,
                        "judge_retries": g.retries,
                        "forced_verdicts": g.forced,
                        "judge_error": error,
                        "checklist_score": None,
                        "checklist_verdicts": None,
                    },
                )
            )
        return out

    def failed_rows(self, judge: Any, rows: list[SourceRow], items: list[Any], failure: JudgeFailure) -> BatchOut:
        return self._grade_rows(
            judge, rows, [Grade(None, failures=judge.capabilities.num_samples, error=failure)] * len(rows)
        )
