"""Running a prepared job in this process, one batch in memory at a time, with a progress bar."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prom_reward.core.protocol import Retry
from prom_reward.jobs.batch import Sink, check_read, judge_and_commit
from prom_reward.jobs.plan import Plan
from prom_reward.jobs.source import SourceRow, iter_file
from prom_reward.jobs.summary import JobSummary


def _source(plan: Plan) -> Iterator[SourceRow]:
    """The job's rows that are in a batch left, in order (others counted, not parsed, where the layout allows)."""
    shards, k = plan.shards, [0]

    def want(i: int) -> bool:
        while k[0] < len(shards) and shards[k[0]]["stop"] <= i:
            k[0] += 1
        return k[0] < len(shards) and shards[k[0]]["start"] <= i

    def raw(filter_ids: bool) -> Iterator[SourceRow]:
        for path, first, _ in plan.scan.files:
            yield from iter_file(path, first, want=want if filter_ids else None)

    if not plan.kind.regroups:
        yield from raw(True)
        return
    yield from (row for row in plan.kind.group(raw(False)) if want(row.id))  # the groups' ids: wanted alike


def judge_locally(plan: Plan, judge: Any, summary: JobSummary, progress: bool, outage: Retry | None = None) -> None:
    """Judge every batch left in ``plan`` with ``judge`` under the job's ``outage``, counting into ``summary``."""
    from tqdm import tqdm

    sink = Sink(plan.target.folder, plan.target.fmt, plan.scan.schema)
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
                rec = judge_and_commit(plan.kind, judge, prepare, batch, shard, sink, "local", outage)
                rec["io_seconds"] += read
                rec["seconds"] += read
                summary.add(rec)
                bar.update(len(batch))  # the batches count the job's rows (groups)
                bar.set_postfix(failed=summary.failed, refresh=False)
                batch, shard = [], next(shards, None)
                left = time.perf_counter()
    if shard is not None:  # the input ended before the batches the check counted
        check_read(batch, shard)
