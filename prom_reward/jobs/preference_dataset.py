"""DPO preference pairs from judge verdicts: ``build_preference_dataset``.

From several completions per prompt, build a ``datasets.Dataset`` that TRL's ``DPOTrainer``
consumes: ``prompt``, ``chosen``, ``rejected`` (strings, or message lists when the prompt is a
message list: the original layout is kept, the judge reads ``prompt_text``/``completion_text``)
plus ``score_chosen``, ``score_rejected``, ``margin``, feedback, and bookkeeping columns
``source_index`` (input row), ``chosen_index``/``rejected_index`` (positions in its completions).

Input rows: ``{"prompt": str | messages, "completions": [str | messages, ...],
"reference_answer"?: str, "rubric"?: name | dict}``; column names, the long layout (one row per
completion) and every other option are fields of ``PreferenceConfig``.

Strategies (details in ``prom_reward.preferences.strategies``):

- ``best_vs_worst`` (default): grade all completions; chosen = highest, rejected = lowest;
  all-equal rows are re-judged by ``judge.compare_by_grades`` (temperature-1.0 rounds, as in the
  paper); adds ``feedback_chosen``, ``feedback_rejected``, ``tie_rounds``; margin in score points.
- ``all_pairs``: every pair judged with ``judge.compare(..., swap=True)``; scores are
  P(chosen wins) and 1 - that; adds ``feedback``, ``swap_agreement``; margin = 2P - 1.

Pairs with ``margin < min_margin`` are dropped. Every dropped candidate pair is counted by reason
(``judge_failed``, ``tie``, ``swap_disagreement``, ``below_min_margin``) in the stats (a ``JobSummary``,
the summary of every job).

Files: ``prom_reward.jobs.run.pairs_file`` (``prom-reward pairs``) writes the same pairs to a .jsonl
file batch by batch, resumable, with the skip records beside them; this function keeps them in memory.
A judge backend that fails (an unreachable server) raises ``BackendError``.

Bad input (missing column, fewer than 2 completions, a completion not in the prompt's layout,
an unknown rubric) raises ``InputError`` naming the row and field, before any row is judged.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Good. [RESULT] 4", "Poor. [RESULT] 1"])
    >>> ds, stats = build_preference_dataset(judge, [{"prompt": "2+2?", "completions": ["4", "5"]}],
    ...                                      rubric="factual_validity")
    >>> ds[0]["chosen"], ds[0]["rejected"], ds[0]["margin"], stats.pairs
    ('4', '5', 3.0, 1)
"""

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
    """Counts of pairs and skips (``pairs``, ``skipped`` by reason, ``rows_without_pairs``, ``tie_rounds`` ...)."""


def _dataset(pairs: list[dict[str, Any]], cfg: PreferenceConfig) -> Any:
    from datasets import Dataset

    if not pairs:  # the columns its pairs would have: the common ones, the strategy's, the kept ones
        others = {c for s, cols in STRATEGY_COLUMNS.items() if s != cfg.strategy for c in cols}
        return Dataset.from_dict({c: [] for c in OUTPUT_COLUMNS + cfg.keep_columns if c not in others})
    return Dataset.from_list(pairs)


def _source(rows: str | Path | Iterable[dict[str, Any]]) -> Iterator[SourceRow]:
    if isinstance(rows, (str, Path)):
        return iter_rows(expand_inputs(rows))
    return (SourceRow(i, f"row {i}", r) for i, r in enumerate(rows))


def build_preference_dataset(
    judge: PrometheusJudge,
    rows: str | Path | Iterable[dict[str, Any]],
    config: PreferenceConfig | None = None,
    *,
    batch_size: int = 64,
    **options: Any,
) -> PreferenceResult:
    """Judge the completions of every input row and return the preference pairs (see the module doc).

    Args:
        judge: the judge (its backend, sampling, ``num_samples``, ``max_tie_rounds`` apply).
        rows: a .jsonl/.json/.parquet path, a ``datasets.Dataset``, or any iterable of dict rows.
        config: a ``PreferenceConfig``; ``**options`` override its fields (``strategy="all_pairs"``).
        batch_size: rows per judge call (plus one call for a batch's ties).
    """
    cfg = dataclasses.replace(config or PreferenceConfig(), **options)
    JobConfig(batch_size=batch_size)  # checked as every job's batch_size
    start = time.perf_counter()
    kind = PairsJob(cfg)
    kind.check_format(judge.format)  # a rubric for all that the judge's format refuses: before any judging
    kind = kind.for_format(judge.format)
    prepare = kind.preparer()
    source = list(kind.group(_source(rows)))
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
    return PreferenceResult(_dataset(pairs, cfg), stats)


__all__ = ["PreferenceConfig", "PreferenceResult", "build_preference_dataset"]
