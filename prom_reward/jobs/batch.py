"""One batch of a job, judged and committed (``judge_and_commit``): what the local runner does per batch and each
Ray judge actor per shard (a pairs part is committed after its skip records)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.core.protocol import Retry
from prom_reward.errors import InputError
from prom_reward.jobs.parts import write_part
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import BatchOut, JobKind, Prepare, run_batch


@dataclass(frozen=True)
class Sink:
    """Where a job's batches go: the part folder, ``jsonl`` or ``parquet``, the Parquet schema."""

    folder: str | Path
    fmt: str
    schema: Any = None


_COUNTS = (
    "forced prompt_tokens completion_tokens samples parse_failures stored_samples stored_prompt_tokens "
    "stored_completion_tokens"
)
STATS = {"retried": "retries"} | {k: k for k in _COUNTS.split()}
"""A batch record's judge counts: the record's name -> its ``JudgeStats`` field."""


def judge_rows(
    kind: JobKind, judge: Any, prepare: Prepare, rows: list[SourceRow], worker: str, outage: Retry | None = None
) -> tuple[BatchOut, dict[str, Any]]:
    """Judge ``rows`` (``run_batch``); returns what they gave and the batch's record (counts, judge stats)."""
    s = judge.stats
    before = {k: getattr(s, stat) for k, stat in STATS.items()}
    t0 = time.perf_counter()
    out = run_batch(kind, judge, rows, prepare, outage)
    pairs = kind.name == "pairs"
    paired = {p["source_index"] for p in out.rows} if pairs else set()
    rec: dict[str, Any] = {
        k: getattr(out, k) for k in ("judged", "failed", "backend_failed", "tie_breaks", "tie_rounds")
    }
    rec.update(
        rows=sum(r.size for r in rows),  # input rows: a long-layout group counts its rows
        pairs=len(out.rows) if pairs else 0,
        skipped=json.dumps(out.skipped),
        no_expected=json.dumps(out.no_expected),
        rows_without_pairs=sum(r.size for r in rows if r.source_index not in paired) if pairs else 0,
        backend_error=out.backend_error or "",
        worker=worker,
    )
    rec.update({k: getattr(s, stat) - before[k] for k, stat in STATS.items()})
    rec.update(seconds=time.perf_counter() - t0, io_seconds=0.0)
    return out, rec


def check_read(rows: list[SourceRow], shard: dict[str, Any]) -> None:
    """``InputError`` unless ``rows`` are the rows ``[start, stop)`` of ``shard`` the input check counted."""
    start, stop = int(shard["start"]), int(shard["stop"])
    if len(rows) != stop - start or (rows and (rows[0].id, rows[-1].id) != (start, stop - 1)):
        raise InputError(
            f"{shard.get('path') or 'the input'}: changed while the job ran (rows {start}..{stop - 1} were checked, "
            f"{len(rows)} of them read now); fix: keep the input as it was until the job is done, then run again "
            "with --resume (or start over with --overwrite)"
        )


def judge_and_commit(
    kind: JobKind,
    judge: Any,
    prepare: Prepare,
    rows: list[SourceRow],
    shard: dict[str, Any],
    sink: Sink,
    worker: str,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """Judge the rows of ``shard`` (``check_read``), commit them, return the batch's record."""
    check_read(rows, shard)
    out, rec = judge_rows(kind, judge, prepare, rows, worker, outage)
    t1 = time.perf_counter()
    start, stop = int(shard["start"]), int(shard["stop"])
    if kind.name == "pairs":
        write_part(Path(sink.folder) / "skipped", start, stop, out.records, "jsonl")
    write_part(sink.folder, start, stop, out.rows, sink.fmt, sink.schema, failed=out.backend_error)
    written = time.perf_counter() - t1
    rec.update(start=start, seconds=rec["seconds"] + written, io_seconds=written)
    return rec
