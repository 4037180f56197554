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
(``judge_failed``, ``tie``, ``swap_disagreement``, ``below_min_margin``) in ``PreferenceStats``.

Resuming: with ``output="pairs.jsonl"`` rows are judged ``chunk_size`` at a time (one judge call
per chunk, plus one for its ties) and each chunk's pairs are appended as it finishes. Two sidecars
sit beside the output: ``pairs.skipped.jsonl`` (one record per dropped candidate pair) and
``pairs.progress.json`` (input rows done, lines written, cumulative stats), replaced atomically
after each chunk. ``resume=True`` cuts both JSONL files back to what the progress file vouches
for (a crash between append and progress loses nothing but that chunk) and continues after the
last finished row, so no row, skipped or not, is judged twice; the result equals an
uninterrupted run. ``resume=False`` starts over (overwrites). Resuming checks that strategy,
min_margin, swap and layout match the first run (ConfigError otherwise); keep the input the same.

Bad input (missing column, fewer than 2 completions, a completion not in the prompt's layout,
an unknown rubric) raises ``InputError`` naming the row and field, before that chunk is judged.

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
import json
import os
import time
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from prom_reward.errors import ConfigError, InputError
from prom_reward.jobs.io import read_rows
from prom_reward.core.judge import PrometheusJudge
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.preferences.rows import PreferenceRow, RubricResolver, group_long, validate_row
from prom_reward.preferences.strategies import ChunkOutcome, judge_chunk

_PROGRESS_VERSION = 1


@dataclass
class PreferenceStats:
    """Counters of a preference build (cumulative over resumed runs unless noted)."""

    rows: int = 0
    """Input rows (prompt groups) accounted for: judged, skipped, or done by an earlier run."""
    pairs: int = 0
    """Pairs written."""
    rows_without_pairs: int = 0
    """Rows that gave no pair at all."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Dropped candidate pairs by reason (one candidate per row for best_vs_worst)."""
    tie_breaks: int = 0
    """best_vs_worst rows whose all-equal grades were re-judged."""
    tie_rounds: int = 0
    """Temperature-1.0 re-grading rounds spent on those."""
    resumed_rows: int = 0
    """This run: rows found done in the output and not judged again."""
    judged_rows: int = 0
    """This run: rows sent to the judge."""
    seconds: float = 0.0
    """This run: wall time."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return dataclasses.asdict(self)


class PreferenceResult(NamedTuple):
    """``build_preference_dataset``'s result; unpacks as ``dataset, stats``."""

    dataset: Any
    """The pairs as a ``datasets.Dataset`` (read back from the output file when one was given)."""
    stats: PreferenceStats
    """Counts of pairs and skips."""


def sidecar_paths(output: str | Path) -> tuple[Path, Path]:
    """(skipped records, progress file) beside an output: ``OUT.skipped.jsonl``, ``OUT.progress.json``."""
    p = Path(output)
    return p.with_suffix(".skipped.jsonl"), p.with_suffix(".progress.json")


def _cut_to_lines(path: Path, n: int) -> None:
    """Keep the first ``n`` complete lines of a file (drop a crashed run's unvouched tail)."""
    if not path.exists():
        if n:
            raise ConfigError(f"{path}: missing, but the progress file says it holds {n} rows; start over "
                              "without resume")
        path.touch()
        return
    offset = 0
    with open(path, "rb") as f:
        for _ in range(n):
            line = f.readline()
            if not line.endswith(b"\n"):
                raise ConfigError(f"{path}: has fewer rows than the progress file records ({n}); it was "
                                  "changed by hand: start over without resume")
            offset += len(line)
    with open(path, "r+b") as f:
        f.truncate(offset)


class _Progress:
    """The output file, its sidecars and the progress record of one (possibly resumed) run."""

    def __init__(self, output: Path, cfg: PreferenceConfig, resume: bool) -> None:
        if output.suffix.lower() not in (".jsonl", ".ndjson"):
            raise ConfigError(f"{output}: pairs are written as JSON lines (resumable); use a .jsonl output")
        self.output = output
        self.skipped_path, self.path = sidecar_paths(output)
        self.state: dict[str, Any] = {"version": _PROGRESS_VERSION, "config": cfg.fingerprint(), "rows_done": 0,
                                      "pair_lines": 0, "skipped_lines": 0, "conversational": None,
                                      "stats": PreferenceStats().to_dict()}
        if resume and self.path.exists():
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            if saved.get("config") != self.state["config"]:
                raise ConfigError(f"{output} was written with {saved.get('config')}, not {cfg.fingerprint()}; "
                                  "resume with the same options or write to another output")
            self.state = saved
            _cut_to_lines(output, saved["pair_lines"])
            _cut_to_lines(self.skipped_path, saved["skipped_lines"])
        elif resume and output.exists() and output.stat().st_size:
            raise ConfigError(f"{output} exists but {self.path} does not, so it cannot be resumed safely; "
                              "start over without resume or write to another output")
        else:
            output.write_bytes(b"")
            self.skipped_path.write_bytes(b"")
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.state), encoding="utf-8")
        os.replace(tmp, self.path)

    @staticmethod
    def _append(path: Path, rows: list[dict[str, Any]]) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())

    def commit(self, rows_done: int, out: ChunkOutcome, stats: PreferenceStats, conversational: bool | None) -> None:
        """Append one chunk's pairs and skips, then record them as done."""
        self._append(self.output, out.pairs)
        self._append(self.skipped_path, out.skipped)
        self.state.update(rows_done=rows_done, pair_lines=self.state["pair_lines"] + len(out.pairs),
                          skipped_lines=self.state["skipped_lines"] + len(out.skipped),
                          conversational=conversational, stats=stats.to_dict())
        self._save()


def _chunks(rows: Iterator[tuple[int, Any]], size: int) -> Iterator[list[tuple[int, Any]]]:
    while chunk := list(islice(rows, size)):
        yield chunk


def _columns(cfg: PreferenceConfig) -> list[str]:
    extra = (["feedback_chosen", "feedback_rejected", "tie_rounds"] if cfg.strategy == "best_vs_worst"
             else ["feedback", "swap_agreement"])
    return ["source_index", "prompt", "chosen", "rejected", "score_chosen", "score_rejected", "margin",
            "chosen_index", "rejected_index", *extra, *cfg.keep_columns]


def _dataset(pairs: list[dict[str, Any]], cfg: PreferenceConfig) -> Any:
    from datasets import Dataset

    if not pairs:
        return Dataset.from_dict({c: [] for c in _columns(cfg)})
    return Dataset.from_list(pairs)


def _tally(stats: PreferenceStats, rows: list[PreferenceRow], out: ChunkOutcome) -> None:
    stats.rows += len(rows)
    stats.judged_rows += len(rows)
    stats.pairs += len(out.pairs)
    with_pairs = {p["source_index"] for p in out.pairs}
    stats.rows_without_pairs += sum(1 for r in rows if r.index not in with_pairs)
    for s in out.skipped:
        stats.skipped[s["reason"]] = stats.skipped.get(s["reason"], 0) + 1
    stats.tie_breaks += out.tie_breaks
    stats.tie_rounds += out.tie_rounds


def build_preference_dataset(
    judge: PrometheusJudge,
    rows: "str | Path | Iterable[dict[str, Any]]",
    config: PreferenceConfig | None = None,
    *,
    output: str | Path | None = None,
    resume: bool = False,
    progress: Callable[[PreferenceStats], None] | None = None,
    **options: Any,
) -> PreferenceResult:
    """Judge the completions of every input row and return the preference pairs (see the module doc).

    Args:
        judge: the judge (its backend, sampling, ``num_samples``, ``max_tie_rounds`` apply).
        rows: a .jsonl/.json/.parquet path, a ``datasets.Dataset``, or any iterable of dict rows.
        config: a ``PreferenceConfig``; ``**options`` override its fields (``strategy="all_pairs"``).
        output: a .jsonl path to write pairs to as chunks finish (plus the two sidecars).
        resume: continue an interrupted run on the same ``output`` instead of overwriting it.
        progress: called with the running stats after every chunk (e.g. to move a progress bar).
    """
    cfg = dataclasses.replace(config or PreferenceConfig(), **options)
    start = time.perf_counter()
    source: Iterable[dict[str, Any]] = read_rows(rows) if isinstance(rows, (str, Path)) else rows
    if cfg.layout == "long":
        source = group_long(source, cfg)
    rubrics = RubricResolver(cfg, need_scores=cfg.strategy == "best_vs_worst")
    store = _Progress(Path(output), cfg, resume) if output is not None else None
    stats = PreferenceStats(**store.state["stats"]) if store else PreferenceStats()
    done = store.state["rows_done"] if store else 0
    conversational: bool | None = store.state["conversational"] if store else None
    stats.resumed_rows, stats.judged_rows, stats.seconds = done, 0, 0.0
    pairs: list[dict[str, Any]] = []
    for chunk in _chunks(islice(enumerate(source), done, None), cfg.chunk_size):
        valid = [validate_row(i, row, cfg, rubrics) for i, row in chunk]
        for r in valid:
            if conversational is None:
                conversational = r.conversational
            elif r.conversational != conversational:
                want = "message lists" if conversational else "strings"
                raise InputError(f"row {r.index}: {cfg.prompt_column} must be {want} like the rows before it; "
                                 "a dataset holds one layout", index=r.index, field=cfg.prompt_column)
        out = judge_chunk(judge, valid, cfg)
        _tally(stats, valid, out)
        stats.seconds = time.perf_counter() - start
        if store:
            store.commit(chunk[-1][0] + 1, out, stats, conversational)
        else:
            pairs.extend(out.pairs)
        if progress is not None:
            progress(stats)
    if store:
        pairs = list(read_rows(store.output))
    stats.seconds = time.perf_counter() - start
    return PreferenceResult(_dataset(pairs, cfg), stats)


__all__ = ["PreferenceConfig", "PreferenceResult", "PreferenceStats", "build_preference_dataset", "sidecar_paths"]
