"""Batches of a job: one judged and committed (``judge_and_commit``, also each Ray judge actor's step; a pairs part
after its skip records), and the local runner (``judge_locally``), one batch in memory at a time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from prom_reward.core.protocol import Retry
from prom_reward.core.results import JudgeFailure
from prom_reward.errors import BackendError, ConfigError, ContextLengthError, InputError
from prom_reward.jobs.parts import write_part
from prom_reward.jobs.plan import SKIPPED, Plan, Target
from prom_reward.jobs.source import ITEM_PREFIX, SourceRow, iter_file
from prom_reward.jobs.spec import BatchOut, JobKind, Prepare
from prom_reward.jobs.summary import JobSummary

_COUNTS = (
    "forced prompt_tokens completion_tokens samples parse_failures stored_samples stored_prompt_tokens "
    "stored_completion_tokens"
)
STATS = {"retried": "retries"} | {k: k for k in _COUNTS.split()}
"""A batch record's judge counts: the record's name -> its ``JudgeStats`` field."""


def judge_rows(
    kind: JobKind, judge: Any, prepare: Prepare, rows: list[SourceRow], worker: str, outage: Retry | None = None
) -> tuple[BatchOut, dict[str, Any]]:
    """Judge ``rows`` in one judge call; returns what they gave and the batch's record (counts, judge stats)."""
    s = judge.stats
    before = {k: getattr(s, stat) for k, stat in STATS.items()}
    t0 = time.perf_counter()
    items = [prepare(r) for r in rows]
    try:
        out = kind.judge_items(judge, rows, items, outage)
    except BackendError as e:
        out = kind.failed_rows(judge, rows, items, JudgeFailure("transport", str(e)))
    except ContextLengthError as e:  # max_tokens leaves no room for any prompt: the job's setting
        raise ConfigError(ITEM_PREFIX.sub("", str(e))) from e
    pairs = kind.name == "pairs"
    paired = {p["source_index"] for p in out.rows} if pairs else set()
    rec = {k: getattr(out, k) for k in ("judged", "failed", "backend_failed", "tie_breaks", "tie_rounds")}
    rec.update(
        rows=sum(r.size for r in rows),  # input rows: a long-layout group counts its rows
        pairs=len(out.rows) if pairs else 0,
        skipped=json.dumps(out.skipped),
        no_expected=json.dumps(out.no_expected),
        rows_without_pairs=sum(r.size for r in rows if r.source_index not in paired) if pairs else 0,
        backend_error=out.backend_error or "",
        worker=worker,
        io_seconds=0.0,
    )
    rec.update({k: getattr(s, stat) - before[k] for k, stat in STATS.items()}, seconds=time.perf_counter() - t0)
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
    target: Target,
    worker: str,
    outage: Retry | None = None,
    read: float = 0.0,
) -> dict[str, Any]:
    """Judge the rows of ``shard`` (``check_read``), commit them to ``target``'s parts, return the batch's record
    (``read``: the seconds spent reading its rows)."""
    check_read(rows, shard)
    out, rec = judge_rows(kind, judge, prepare, rows, worker, outage)
    t1 = time.perf_counter()
    start, stop = int(shard["start"]), int(shard["stop"])
    if kind.name == "pairs":
        write_part(target.folder / SKIPPED, start, stop, out.records, "jsonl")
    write_part(target.folder, start, stop, out.rows, target.fmt, target.schema, failed=out.backend_error)
    io = time.perf_counter() - t1 + read
    rec.update(start=start, seconds=rec["seconds"] + io, io_seconds=io)
    return rec


def _source(plan: Plan) -> Iterator[SourceRow]:
    """The job's rows that are in a batch left, in order (others counted, not parsed, where the layout allows)."""
    shards, k = plan.shards, [0]

    def want(i: int) -> bool:
        while k[0] < len(shards) and shards[k[0]]["stop"] <= i:
            k[0] += 1
        return k[0] < len(shards) and shards[k[0]]["start"] <= i

    filtered = None if plan.kind.regroups else want  # a group's rows are all read: its id is known once grouped
    rows = (row for path, first, _ in plan.scan.files for row in iter_file(path, first, want=filtered))
    return (row for row in plan.kind.group(rows) if want(row.id))


def judge_locally(plan: Plan, judge: Any, summary: JobSummary, progress: bool, outage: Retry | None = None) -> None:
    """Judge every batch left in ``plan`` with ``judge`` under the job's ``outage``, counting into ``summary``."""
    from tqdm import tqdm

    prepare = plan.kind.preparer()
    shards = iter(plan.shards)
    shard = next(shards, None)
    batch: list[SourceRow] = []
    total = sum(s["stop"] - s["start"] for s in plan.shards)
    left = time.perf_counter()
    with tqdm(desc=plan.kind.name, unit="row", total=total, disable=not progress) as bar:
        for row in _source(plan):
            if shard is None:
                break
            batch.append(row)
            if row.id == shard["stop"] - 1:
                read = time.perf_counter() - left
                summary.add(
                    judge_and_commit(plan.kind, judge, prepare, batch, shard, plan.target, "local", outage, read)
                )
                bar.update(len(batch))  # the batches count the job's rows (groups)
                bar.set_postfix(failed=summary.failed, refresh=False)
                batch, shard = [], next(shards, None)
                left = time.perf_counter()
    if shard is not None:  # the input ended before the batches the check counted
        check_read(batch, shard)
