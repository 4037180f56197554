"""``compare`` jobs: a pairwise verdict (A or B, both orders judged with ``swap``) per row of instruction and two
responses; a tie is decided without a winner, a failure never gets a made-up one. Columns: docs/jobs.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from prom_reward.core.items import PairItem
from prom_reward.core.protocol import Retry
from prom_reward.core.results import JudgeFailure, Verdict, tie_reason
from prom_reward.format.judge_format import Task
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import BatchOut, JobKind, Prepare, failure_text, resolved, resolver

RESULT_TYPES = {
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
    result_types: ClassVar[dict[str, str]] = RESULT_TYPES

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
