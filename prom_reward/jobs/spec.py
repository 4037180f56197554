"""Job kinds (``JobKind``: ``grade``, ``compare``, ``pairs``): the columns a job reads and writes, its judge call,
and what a batch produced (``BatchOut``); the options of a job (``JobConfig``: batches, resume, overwrite, outage
policy) and of its Ray pool (``RayConfig``)."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from prom_reward.core.protocol import Retry
from prom_reward.core.results import JudgeFailure, Judgment
from prom_reward.declared import check, refuse_unknown, setting
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JudgeFormat, Task, check_task
from prom_reward.format.rubrics import NO_RUBRIC, Rubric, RubricResolver
from prom_reward.jobs.source import SourceRow
from prom_reward.rewards.outage import OutagePolicy

FAILED = ("judge_failed", "backend_failed")
"""The reasons of a failed outcome (``backend_failed``: a resume judges it again)."""
SKIPPED = ("tie", "swap_disagreement", "below_min_margin", "too_few_completions")
"""The reasons of an outcome without a result that is not a failure (``skipped``; docs/jobs.md)."""


@dataclass
class BatchOut:
    """What judging one batch produced: its output rows (input order), pairs' skip records (failed ones included),
    and the counts of ``JobSummary``'s fields of the same names; every outcome counted once in ``judged``,
    ``failed`` or ``skipped``."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    judged: int = 0
    failed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    no_expected: dict[str, int] = field(default_factory=dict)
    backend_error: str | None = None
    """Why the judge backend failed for rows of the batch: a resume judges the batch again."""
    backend_failed: int = 0
    tie_breaks: int = 0
    tie_rounds: int = 0

    def count(self, judged: bool, error: JudgeFailure | None, skip: str | None = None) -> None:
        """Count one outcome: judged, else skipped for ``skip``, else failed; the batch marked for a resume when the
        transport failed it (``backend_error``)."""
        if judged:
            self.judged += 1
        elif skip is not None:
            self.skip(skip)
        else:
            self.failed += 1
        if error is not None and error.kind == "transport":
            self.backend_error = self.backend_error or failure_text(error)
            self.backend_failed += 1

    def skip(self, reason: str) -> None:
        """Count one outcome skipped for ``reason`` (``SKIPPED``)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


Prepare = Callable[[SourceRow], Any]


class JobKind(ABC):
    """One kind of job: its input columns, its row checks, its judge call and its output columns."""

    name: ClassVar[str]
    """``grade``, ``compare`` or ``pairs``."""
    jsonl_only: ClassVar[bool] = False
    """Outputs are JSON lines only (pairs: prompts and completions may be strings or message lists)."""
    result_types: ClassVar[dict[str, str]] = {}
    """The columns the kind adds to each output row (after ``source_index`` and the input columns), in order, and
    their pyarrow types (``pyarrow.<type>()``); empty for JSON-lines-only kinds (pairs: ``OUTPUT_COLUMNS``)."""
    settings: ClassVar[Any] = None
    """The dataclass of the kind's options, held as ``config`` (None: the kind itself; pairs: ``PreferenceConfig``)."""
    rubric: Rubric | None
    """The one rubric of every row (resolved), None when each row names its own."""

    @classmethod
    def column_options(cls) -> tuple[str, ...]:
        """The kind's input column options (its ``--<role>-col`` flags), in field order."""
        return tuple(f.name for f in dataclasses.fields(cls.settings or cast(Any, cls)) if f.name.endswith("_column"))

    def fingerprint(self) -> dict[str, Any]:
        """The options that change the result (a resumed job must share them), as plain data (``settings``' fields)."""
        options: Any = cast(Any, self).config if self.settings else self  # a rubric as data, a callable by name
        values = ((f.name, getattr(options, f.name)) for f in dataclasses.fields(options) if f.init)
        return {k: dataclasses.asdict(v) if isinstance(v, Rubric) else getattr(v, "__qualname__", v) for k, v in values}

    @abstractmethod
    def task(self) -> Task:
        """What the job asks its judge for: ``absolute`` grades or ``relative`` verdicts."""

    def check_format(self, fmt: JudgeFormat) -> Any:
        """The job for a judge in ``fmt`` (``for_format``); ``ConfigError`` before the output is touched when such a
        judge cannot run the job's task or rubric."""
        check_task(fmt, self.task())
        problem = None if self.rubric is None else fmt.rubric_problem(self.rubric, self.task())
        if problem is not None:
            raise ConfigError(f"{problem} (judge format {fmt.name!r})", "rubric")
        return self.for_format(fmt)

    def for_format(self, fmt: JudgeFormat) -> Any:
        """The job for a judge in ``fmt``: rows that name no rubric get ``NO_RUBRIC`` where ``fmt``'s prompt shows
        none (its columns may follow the format's scale)."""
        return dataclasses.replace(cast(Any, self), rubric=self.rubric_for(fmt))

    def rubric_for(self, fmt: JudgeFormat) -> Rubric | None:
        """The rubric of rows that name none: the job's, else ``NO_RUBRIC`` when ``fmt``'s prompt shows none."""
        if self.rubric is None and self.task() in fmt.tasks and not fmt.uses_rubric(self.task()):
            return NO_RUBRIC
        return self.rubric

    @abstractmethod
    def preparer(self) -> Prepare:
        """A function checking one row into the item the judge reads (``InputError`` naming row, column, option)."""

    @abstractmethod
    def judge_items(self, judge: Any, rows: list[SourceRow], items: list[Any], outage: Retry | None = None) -> BatchOut:
        """Judge a batch of prepared items in one judge call."""

    @abstractmethod
    def failed_rows(self, judge: Any, rows: list[SourceRow], items: list[Any], failure: JudgeFailure) -> BatchOut:
        """The output of rows whose judge call failed whole, each item's outcome ``failure``."""

    def result_schema(self, nested: dict[str, Any] | None = None) -> Any:
        """The pyarrow types of ``result_types`` (``nested``: some built; None for JSON-lines-only kinds)."""
        import pyarrow as pa

        types = self.result_types.items()
        return pa.schema([(k, (nested or {}).get(k) or getattr(pa, t)()) for k, t in types]) if types else None

    @property
    def regroups(self) -> bool:
        """The job's rows are groups of the files' rows (``group``)."""
        return False

    def group(self, rows: Iterator[SourceRow]) -> Iterator[SourceRow]:
        """The rows a job judges from the rows of the files (pairs' long layout groups them)."""
        return rows

    def output_row(self, row: SourceRow, result: dict[str, Any]) -> dict[str, Any]:
        """``source_index``, the input columns (those named like a result column are replaced), the results."""
        out: dict[str, Any] = {"source_index": row.source_index}
        out.update((k, v) for k, v in row.data.items() if k != "source_index" and k not in result)
        out.update(result)
        return out

    @staticmethod
    def judgment_columns(j: Judgment) -> dict[str, Any]:
        """The result columns a ``Grade`` and a ``Verdict`` ``j`` fill alike: its feedback and counts."""
        return {
            "feedback": j.feedback,
            "judge_failures": j.failures,
            "judge_retries": j.retries,
            "forced_verdicts": j.forced,
        }


def resolver(rubric: Any) -> RubricResolver:
    """The ``RubricResolver`` of a job: ``rubric`` for every row, else each row's rubric column."""
    return RubricResolver(
        rubric, what="row", missing_hint="fix: pass {rubric} NAME|FILE, or name the column with {rubric_column}"
    )


def resolved(rubric: Any) -> Rubric | None:
    """A job's one rubric resolved (None: each row's)."""
    return rubric if rubric is None or isinstance(rubric, Rubric) else resolver(rubric).default


def failure_text(error: JudgeFailure | None) -> str | None:
    """``judge_error`` of a row failed on its input (too long, a rubric the format refuses) or the transport."""
    if error is None or error.kind == "output":
        return None
    if error.kind == "input" and error.reason.startswith("rubric: "):  # the row's rubric does not fit the format
        return error.reason
    return f"{'too long for the judge' if error.kind == 'input' else 'backend failed'}: {error.reason}"


JOB_OUTAGE = OutagePolicy(on_exhausted="fail")
"""A job's outage policy unless given: past ``budget_s``, the rows left unanswered are marked for ``--resume``."""


@dataclass(frozen=True)
class JobConfig:
    """How a job reads, commits and resumes (the same locally and on Ray)."""

    batch_size: int = setting(
        256,
        help="Rows per judge call and per part file: the unit of commit and of what a killed run judges again.",
        ge=1,
    )
    resume: bool = setting(
        False,
        help="""Continue the job that wrote the output (same input and options, checked): judge only the rows not
        committed yet, and again those whose judge backend failed.""",
    )
    overwrite: bool = setting(
        False, help="Start over on an existing output (it stays intact until the new one is complete)."
    )
    progress: bool = setting(True, help="Show a progress bar (and Ray Data's) on stderr.")
    outage: OutagePolicy = setting(
        JOB_OUTAGE,
        help="""How requests the judge's transport failed are asked again (``prom_reward.rewards.outage``; a dict of
        its fields over ``JOB_OUTAGE``'s): past the budget, ``"fail"`` marks their rows for ``--resume`` and
        ``"raise"`` stops the job (``JudgeUnavailableError``, exit 4).""",
    )

    def __post_init__(self) -> None:
        if isinstance(self.outage, dict):
            refuse_unknown(self.outage, [f.name for f in dataclasses.fields(OutagePolicy)], "field", "outage")
            object.__setattr__(self, "outage", dataclasses.replace(JOB_OUTAGE, **self.outage))
        check(self)
        if self.resume and self.overwrite:
            raise ConfigError(
                "{resume} and {overwrite} both given; fix: give one ({resume} continues OUTPUT, {overwrite} starts "
                "it over)",
                mentions=("resume", "overwrite"),
            )


@dataclass(frozen=True)
class RayConfig:
    """The pool of judge actors of a job on Ray (``prom_reward.jobs.batch.judge_on_ray``)."""

    replicas: int | str = setting(
        1,
        help="""Judge actors: a number, or ``"all"``: every GPU of the cluster (every CPU on a CPU cluster) divided
        by what one replica takes.""",
        choices=("all",),
        ge=1,
    )
    num_gpus: float | None = setting(
        None,
        help="GPUs per replica; None: the judge's ``tensor_parallel_size`` where the cluster has GPUs, else 0.",
        ge=0,
    )
    num_cpus: float = setting(1.0, help="CPUs per replica (what a CPU engine gets to itself).", gt=0)
    address: str | None = setting(
        None, help="Ray cluster to join; None: ``RAY_ADDRESS`` if set, else a local Ray started for this job."
    )
    env: dict[str, str] = setting(
        factory=dict, help="Environment variables of the judge actors (``VLLM_CPU_KVCACHE_SPACE``, ...)."
    )
    warmup: bool = setting(
        True,
        help="""A replica with an in-process engine (vllm, transformers; no judgment store) judges one dummy row
        when it starts (``batch.warm_up``), so the engine's first-call costs go with its start-up, not
        into the first batch's time.""",
    )

    def __post_init__(self) -> None:
        check(self)
        object.__setattr__(self, "num_cpus", float(self.num_cpus))
