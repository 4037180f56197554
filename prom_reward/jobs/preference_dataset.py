"""``build_preference_dataset``: DPO preference pairs from judge verdicts, in memory, as a ``datasets.Dataset`` for
TRL's ``DPOTrainer`` (``pairs_file`` writes the same pairs to a file, resumable)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import BackendError
from prom_reward.jobs.batch import judge_rows
from prom_reward.jobs.config import JobConfig
from prom_reward.jobs.pairs import PairsJob
from prom_reward.jobs.source import SourceRow, expand_inputs, iter_rows
from prom_reward.jobs.summary import JobSummary
from prom_reward.preferences.config import OUTPUT_COLUMNS, STRATEGY_COLUMNS, PreferenceConfig


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
    """Judge the completions of every input row and return the preference pairs (``preferences.strategies``).

    Args:
        judge: the judge (its backend, sampling, ``num_samples``, ``max_tie_rounds`` apply).
        rows: a .jsonl/.json/.parquet path, a ``datasets.Dataset``, or any iterable of dict rows.
        config: a ``PreferenceConfig``; ``**options`` override its fields (``strategy="all_pairs"``).
        batch_size: rows per judge call (plus one call for a batch's ties).
    """
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
    while batch := list(islice(it, batch_size)):
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


__all__ = ["PreferenceConfig", "PreferenceResult", "build_preference_dataset"]
