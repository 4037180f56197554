"""Running a prepared job on Ray Data (``judge_on_ray``): the batches left go to a pool of judge actors, each with
its own engine, judged and committed by the local runner's code; a killed actor's batch is retried, never doubled."""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

import prom_reward.errors as errors
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.jobs.batch import judge_and_commit
from prom_reward.jobs.config import JobConfig, RayConfig
from prom_reward.jobs.plan import Plan
from prom_reward.jobs.source import read_range
from prom_reward.jobs.summary import JobSummary
from prom_reward.rewards.outage import Outage

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


__all__ = ["BASELINE_HOOK", "judge_on_ray", "warm_up"]
