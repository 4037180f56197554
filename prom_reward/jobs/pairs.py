"""``pairs`` jobs: DPO preference pairs from several completions per prompt (wide or long layout), written as JSON
lines with their skip records beside them (``OUTPUT.skipped.jsonl``), or kept in memory as a ``datasets.Dataset`` for
TRL's ``DPOTrainer`` (``build_preference_dataset``)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, cast

from prom_reward.checklist.criteria import check_grading_format
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.protocol import Retry
from prom_reward.core.results import JudgeFailure
from prom_reward.errors import BackendError, ConfigError, InputError
from prom_reward.format.judge_format import JudgeFormat, Task
from prom_reward.format.rubrics import Rubric
from prom_reward.jobs.batch import judge_rows
from prom_reward.jobs.source import SourceRow, expand_inputs, iter_rows
from prom_reward.jobs.spec import FAILED, BatchOut, JobConfig, JobKind, Prepare, failure_text, resolved, resolver
from prom_reward.jobs.summary import JobSummary
from prom_reward.preferences.config import OUTPUT_COLUMNS, STRATEGY_COLUMNS, PreferenceConfig
from prom_reward.preferences.rows import PreferenceRow, validate_row
from prom_reward.preferences.strategies import ChunkOutcome, judge_chunk


def group_long(rows: Iterator[SourceRow], cfg: PreferenceConfig) -> Iterator[SourceRow]:
    """Long-layout rows (one completion each) grouped into wide rows, streaming; a group's id counts groups, its
    ``source_index`` is its first row's."""

    def checked(rows: Iterator[SourceRow]) -> Iterator[SourceRow]:
        for row in rows:
            for col, option in ((cfg.prompt_column, "--prompt-col"), (cfg.completion_column, "--completion-col")):
                if col not in row.data:
                    raise InputError(
                        f"{row.where}: column {col!r} missing (columns: {sorted(row.data)}); fix: name "
                        f"the right one with {option}",
                        index=row.id,
                        field=col,
                    )
            yield row

    groups = itertools.groupby(checked(rows), key=lambda r: r.data[cfg.prompt_column])
    for n, (_, members) in enumerate(groups):
        group = list(members)
        data = {k: v for k, v in group[0].data.items() if k != cfg.completion_column}
        data[cfg.completions_column] = [r.data[cfg.completion_column] for r in group]
        yield SourceRow(n, group[0].where, data, first=group[0].id, size=len(group))


@dataclass(frozen=True)
class PairsJob(JobKind):
    """A ``pairs`` job: its ``PreferenceConfig`` (the rubric resolved once, here)."""

    name: ClassVar[str] = "pairs"
    jsonl_only: ClassVar[bool] = True
    settings: ClassVar[Any] = PreferenceConfig

    config: PreferenceConfig = dataclasses.field(default_factory=PreferenceConfig)
    """Strategy, margin, columns, layout ... (``prom_reward.preferences.config``)."""
    ungraded: str | None = None
    """Why a judge in the job's format cannot grade a checklist (``for_format``; a row with one is refused with
    it); None: it can."""

    def __post_init__(self) -> None:
        if not isinstance(self.config.rubric, Rubric | None):
            object.__setattr__(self, "config", dataclasses.replace(self.config, rubric=resolved(self.config.rubric)))

    def task(self) -> Task:
        return "absolute" if self.config.strategy == "best_vs_worst" else "relative"  # grades, else verdicts

    @property
    def rubric(self) -> Rubric | None:  # type: ignore[override]
        return cast(Rubric | None, self.config.rubric)

    def for_format(self, fmt: JudgeFormat) -> PairsJob:
        job = PairsJob(dataclasses.replace(self.config, rubric=self.rubric_for(fmt)))
        try:
            check_grading_format(fmt, self.config.checklist_column)
        except ConfigError as e:
            return dataclasses.replace(job, ungraded=str(e))
        return job

    @property
    def regroups(self) -> bool:
        return self.config.layout == "long"

    def group(self, rows: Iterator[SourceRow]) -> Iterator[SourceRow]:
        return group_long(rows, self.config) if self.regroups else rows

    def preparer(self) -> Prepare:
        cfg = self.config
        rubrics = resolver(cfg.rubric)
        layout: list[bool] = []  # the first row's: a dataset holds one layout

        def prepare(row: SourceRow) -> PreferenceRow:
            try:
                item = validate_row(row.source_index, row.data, cfg, rubrics, self.ungraded)
            except InputError as e:
                if cfg.layout == "long":  # a group of rows: name it by its first line, never by a row number
                    detail = e.problem.removeprefix(f"row {row.source_index}: ")
                    where = f"{row.where}: the group of rows from this line with the same {cfg.prompt_column!r}"
                    raise e.at(where, detail) from None
                raise e.at(row.where) from None
            if not layout:
                layout.append(item.conversational)
            elif item.conversational != layout[0]:
                want = "message lists" if layout[0] else "strings"
                raise InputError(
                    f"{row.where}: row {row.source_index}: {cfg.prompt_column} must be {want} like the rows "
                    "before it; fix: one layout per file",
                    index=row.source_index,
                    field=cfg.prompt_column,
                )
            return item

        return prepare

    def judge_items(
        self, judge: Any, rows: list[SourceRow], items: list[PreferenceRow], outage: Retry | None = None
    ) -> BatchOut:
        out = judge_chunk(judge, items, self.config, outage)
        batch = BatchOut(rows=out.pairs, judged=len(out.pairs), tie_breaks=out.tie_breaks, tie_rounds=out.tie_rounds)
        return _count_records(batch, out.skipped)

    def failed_rows(
        self, judge: Any, rows: list[SourceRow], items: list[PreferenceRow], failure: JudgeFailure
    ) -> BatchOut:
        out = ChunkOutcome()
        for it in items:
            out.skip(it, "backend_failed", None, failure_text(failure))
        return _count_records(BatchOut(), out.skipped)


def _count_records(out: BatchOut, records: list[dict[str, Any]]) -> BatchOut:
    """``out`` with the skip ``records`` kept and counted: failed (``FAILED``) or skipped by reason."""
    out.records = records
    for rec in records:
        if rec["reason"] not in FAILED:
            out.skip(rec["reason"])
            continue
        out.failed += 1
        if rec["reason"] == "backend_failed":
            out.backend_failed += 1
            out.backend_error = out.backend_error or rec["judge_error"]
    return out


class PreferenceResult(NamedTuple):
    """``build_preference_dataset``'s result; unpacks as ``dataset, stats``."""

    dataset: Any
    """The pairs as a ``datasets.Dataset``."""
    stats: JobSummary
    """Counts of pairs and skips."""


def build_preference_dataset(
    judge: PrometheusJudge,
    rows: str | Path | Iterable[dict[str, Any]],
    config: PreferenceConfig | None = None,
    *,
    batch_size: int = 64,
    **options: Any,
) -> PreferenceResult:
    """The preference pairs (``preferences.strategies``) of every row of ``rows`` (a .jsonl/.json/.parquet path, a
    ``datasets.Dataset`` or dict rows) judged by ``judge``; ``**options`` override ``config``'s fields
    (``strategy="all_pairs"``); ``batch_size`` rows per judge call (plus one call for a batch's ties)."""
    cfg = dataclasses.replace(config or PreferenceConfig(), **options)
    JobConfig(batch_size=batch_size)  # checked as every job's batch_size
    start = time.perf_counter()
    kind = PairsJob(cfg).check_format(judge.format)  # a rubric the judge's format refuses: before any judging
    prepare = kind.preparer()
    if isinstance(rows, (str, Path)):
        read: Iterator[SourceRow] = iter_rows(expand_inputs(rows))
    else:
        read = (SourceRow(i, f"row {i}", r) for i, r in enumerate(rows))
    source = list(kind.group(read))
    for row in source:  # the whole input is checked before anything is judged
        prepare(row)
    stats, pairs = JobSummary(job="pairs", output="(in memory)"), []
    it = iter(source)
    while batch := list(itertools.islice(it, batch_size)):
        out, rec = judge_rows(kind, judge, prepare, batch, "local")
        if out.backend_error:
            raise BackendError(out.backend_error)
        stats.add(rec)
        pairs.extend(out.rows)
    stats.output_rows = len(pairs)
    stats.seconds = time.perf_counter() - start
    from datasets import Dataset

    if pairs:
        return PreferenceResult(Dataset.from_list(pairs), stats)
    others = {c for s, cols in STRATEGY_COLUMNS.items() if s != cfg.strategy for c in cols}  # of the other strategy
    return PreferenceResult(
        Dataset.from_dict({c: [] for c in OUTPUT_COLUMNS + cfg.keep_columns if c not in others}), stats
    )
