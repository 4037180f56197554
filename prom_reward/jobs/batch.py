"""Batches of a job: one judged and committed (``judge_and_commit``; a pairs part after its skip records), by the
local runner (``judge_locally``, one batch in memory at a time) or on Ray Data (``judge_on_ray``: the batches left go
to a pool of judge actors, each with its own engine; a killed actor's batch is retried, never doubled)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import prom_reward.errors as errors
from prom_reward.core.protocol import Retry
from prom_reward.core.results import JudgeFailure
from prom_reward.errors import BackendError, ConfigError, ContextLengthError, InputError, PromRewardError
from prom_reward.jobs.parts import write_part
from prom_reward.jobs.plan import SKIPPED, Plan, Target
from prom_reward.jobs.source import ITEM_PREFIX, SourceRow, iter_file, read_range
from prom_reward.jobs.spec import BatchOut, JobConfig, JobKind, Prepare, RayConfig
from prom_reward.jobs.summary import JobSummary
from prom_reward.rewards.outage import Outage

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


BASELINE_HOOK = "PROM_REWARD_RAY_BASELINE"
"""Benchmark hook (``benchmarks/ray_grade.py``), grade jobs: set, every batch also times one plain ``grade_items``
call on its rows (``baseline_seconds`` in its record, after a warm-up on the first); the output is the same."""


class _JudgeWorker:
    """One judge replica: a ``PrometheusJudge`` built once, judging one batch per call under the job's outage policy."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from prom_reward.core.judge import PrometheusJudge

        self.spec = spec
        self.plain = PrometheusJudge(**spec["judge"])
        if spec.get("warmup") and spec["judge"].get("backend", "vllm") in ("vllm", "transformers"):
            warm_up(self.plain)
        self.outage = Outage(spec["outage"])
        self.kind = spec["kind"]
        self.prepare = self.kind.preparer()
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.batches, self.warm = 0, False
        self.left: float | None = None

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:  # one shard a call (``batch_size=1``)
        rec = self._shard({k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in batch.items()})
        return {k: [v] for k, v in rec.items()}

    def _read(self, shard: dict[str, Any]) -> list[Any]:
        return read_range(str(shard["path"]), *(int(shard[k]) for k in ("first_id", "start", "stop", "offset", "line")))

    def _shard(self, shard: dict[str, Any]) -> dict[str, Any]:
        idle = time.perf_counter() - self.left if self.left is not None else 0.0  # waiting for it since the last
        baseline = bool(os.environ.get(BASELINE_HOOK)) and self.kind.name == "grade"
        self.batches += 1
        baseline_s = self._baseline(shard) if baseline and self.batches % 2 else 0.0
        t0 = time.perf_counter()
        try:
            rows = self._read(shard)
            read = time.perf_counter() - t0
            rec = judge_and_commit(
                self.kind, self.plain, self.prepare, rows, shard, self.spec["sink"], self.name, self.outage, read
            )
        except PromRewardError as e:  # a full disk ...: sent back as data (Ray would lose the exception's class)
            self.left = time.perf_counter()
            return {"start": int(shard["start"]), "worker": self.name, "error": f"{type(e).__name__}\t{e}"}
        rec.update(idle_seconds=idle, error="")
        if baseline:
            rec["baseline_seconds"] = baseline_s or self._baseline(shard)
        self.left = time.perf_counter()
        return rec

    def _baseline(self, shard: dict[str, Any]) -> float:
        """``BASELINE_HOOK``: seconds of one plain ``judge.grade`` call on the batch's rows (stats restored)."""
        import copy

        items = [self.prepare(r) for r in self._read(shard)]
        stats = copy.deepcopy(self.plain.stats)
        if not self.warm:
            self.plain.grade_items(items[:8])
            self.warm = True
        t = time.perf_counter()
        self.plain.grade_items(items)
        took = time.perf_counter() - t
        self.plain.stats = stats
        return took


def warm_up(judge: Any) -> None:
    """One dummy grade (the judge's counters restored) on a fresh in-process engine, so that its first-call costs
    are paid with its start-up instead of by the first batch."""
    import copy

    stats = copy.deepcopy(judge.stats)
    judge.grade(["Say hello."], ["Hello."], "helpfulness", num_samples=1)
    judge.stats = stats


def judge_on_ray(plan: Plan, judge: dict[str, Any], cfg: RayConfig, job: JobConfig, summary: JobSummary) -> None:
    """Judge every batch left in ``plan`` on a pool of judge actors, counting into ``summary``."""
    import ray
    from tqdm import tqdm

    progress = job.progress
    if not ray.is_initialized():  # no address: a local Ray started for this job
        ray.init(address=cfg.address or os.environ.get("RAY_ADDRESS") or None, log_to_driver=progress)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    total, gpus = ray.cluster_resources(), cfg.num_gpus
    if gpus is None:  # an engine in the actor gets its GPUs; an HTTP client (--server) or a test backend none
        in_process = judge.get("backend", "vllm") in ("vllm", "transformers")
        gpus = float(judge.get("tensor_parallel_size", 1)) if in_process and total.get("GPU", 0) > 0 else 0.0
    replicas = cfg.replicas
    if replicas == "all":
        replicas = int(total.get("GPU", 0) // gpus) if gpus else int(total.get("CPU", 1) // cfg.num_cpus)
        if replicas < 1:
            raise ConfigError(
                f'replicas="all": the cluster has {total.get("GPU", 0)} GPUs and {total.get("CPU", 0)} '
                f"CPUs, not enough for one replica of {gpus} GPUs / {cfg.num_cpus} CPUs; fix: lower them"
            )
    todo = plan.shards
    replicas = min(int(replicas), len(todo))
    env = {"TOKENIZERS_PARALLELISM": "false", **cfg.env}
    if gpus == 0 and "VLLM_CPU_KVCACHE_SPACE" in os.environ:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", os.environ["VLLM_CPU_KVCACHE_SPACE"])
    sink = dataclasses.replace(plan.target, folder=plan.target.folder.resolve())
    engine = dict(judge)  # inside an actor, vLLM runs tensor parallelism with its own processes, not Ray's executor
    if engine.get("backend", "vllm") == "vllm" and int(engine.get("tensor_parallel_size", 1)) > 1:
        engine["engine_options"] = {"distributed_executor_backend": "mp", **(engine.get("engine_options") or {})}
    spec = {"judge": engine, "kind": plan.kind, "sink": sink, "warmup": cfg.warmup, "outage": job.outage}
    ds = ray.data.from_items(todo, override_num_blocks=min(len(todo), 200)).map_batches(
        _JudgeWorker,
        fn_constructor_kwargs={"spec": spec},
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=replicas),
        num_cpus=cfg.num_cpus,
        num_gpus=gpus or None,
        runtime_env={"env_vars": env},
    )
    with tqdm(
        desc="judged rows", unit="row", total=sum(s["stop"] - s["start"] for s in todo), disable=not progress
    ) as bar:
        for rec in ds.iter_rows():
            if rec.get("error"):  # an actor's PromRewardError, sent as NAME<TAB>message
                name, _, message = str(rec["error"]).partition("\t")
                cls = getattr(errors, name, None)
                if not (isinstance(cls, type) and issubclass(cls, PromRewardError)) or cls is errors.UnknownNameError:
                    cls = PromRewardError
                raise cls(message)
            summary.add(rec)
            bar.update(int(rec["rows"]))
            bar.set_postfix(failed=summary.failed, refresh=False)
