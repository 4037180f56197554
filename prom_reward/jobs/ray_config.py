"""Options and the run summary of judging on Ray (``prom_reward.jobs.ray_run``).

Example:
    >>> cfg = RayJobConfig(judge={"model": "prometheus-7b-v2.0"}, replicas="all", rows_per_shard=128)
    >>> cfg.replicas, cfg.num_cpus
    ('all', 1.0)
    >>> RayJobConfig(judge={}, replicas=0)
    Traceback (most recent call last):
    ...
    prom_reward.errors.ConfigError: replicas: expected an int >= 1 or "all", got 0; give the number of judge actors
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from prom_reward.errors import ConfigError


@dataclass(frozen=True)
class RayJobConfig:
    """How a Ray judging job runs; the judge itself is described by ``judge``."""

    judge: dict[str, Any]
    """``PrometheusJudge`` keyword arguments; every replica builds its own judge (and engine) from them."""
    replicas: "int | str" = 1
    """Judge actors: a number, or ``"all"``: every GPU of the cluster (every CPU on a CPU cluster) divided
    by what one replica takes."""
    num_gpus: float | None = None
    """GPUs per replica; None: the judge's ``tensor_parallel_size`` where the cluster has GPUs, else 0."""
    num_cpus: float = 1.0
    """CPUs per replica (what a CPU engine gets to itself)."""
    rows_per_shard: int = 256
    """Rows per judge call, per part file and per retry unit: what a killed run recomputes at most per replica."""
    resume: bool = False
    """Skip the shards whose part files exist; False starts over (old part files are removed)."""
    address: str | None = None
    """Ray cluster to join; None: ``RAY_ADDRESS`` if set, else a local Ray started for this job."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables of the judge actors (``VLLM_CPU_KVCACHE_SPACE``, ...)."""
    progress: bool = True
    """Show Ray Data's progress bars and a row counter."""
    warmup: bool = True
    """A replica with an in-process engine (vllm, transformers; no judgment store) judges one dummy row
    when it starts (``ray_run.warm_up``), so the engine's first-call costs go with its start-up, not
    into the first shard's time."""

    def __post_init__(self) -> None:
        if not isinstance(self.judge, dict):
            raise ConfigError(f"judge: expected a dict of PrometheusJudge arguments, got {type(self.judge).__name__}")
        r = self.replicas
        if not (r == "all" or (isinstance(r, int) and not isinstance(r, bool) and r >= 1)):
            raise ConfigError(f'replicas: expected an int >= 1 or "all", got {r!r}; give the number of judge actors')
        if self.num_gpus is not None and self.num_gpus < 0:
            raise ConfigError(f"num_gpus: expected >= 0 GPUs per replica, got {self.num_gpus}")
        if self.num_cpus <= 0:
            raise ConfigError(f"num_cpus: expected > 0 CPUs per replica, got {self.num_cpus}")
        if not isinstance(self.rows_per_shard, int) or self.rows_per_shard < 1:
            raise ConfigError(f"rows_per_shard: expected an int >= 1, got {self.rows_per_shard!r}")
        object.__setattr__(self, "num_cpus", float(self.num_cpus))

    def replace(self, **changes: Any) -> "RayJobConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@dataclass
class RaySummary:
    """What a Ray judging run did (this run only; ``resumed_rows`` were done before)."""

    rows: int = 0
    """Input rows judged by this run."""
    failed: int = 0
    """Rows written with a null score or winner (no verdict, or the backend failed: see ``judge_error``);
    ties of ``compare`` jobs are not failures (see ``ties``)."""
    ties: int = 0
    """``compare`` jobs: rows judged a tie (null winner, ``tie`` true: the orders disagree or samples split)."""
    retried: int = 0
    """Re-sampling rounds spent on outputs without a verdict."""
    forced: int = 0
    """Verdicts read by forcing ``[RESULT]``."""
    prompt_tokens: int = 0
    """Judge prompt tokens."""
    completion_tokens: int = 0
    """Judge tokens generated."""
    resumed_rows: int = 0
    """Rows found done (part files present) and not judged again."""
    backend_failed: int = 0
    """Of ``failed``: rows of shards whose judge call failed as a whole (``judge_error`` "backend failed:
    ..."); their parts are marked, and a resume judges them again."""
    retried_shards: int = 0
    """Shards an earlier run wrote after its backend failed, judged again by this resume."""
    retried_rows: int = 0
    """The rows of ``retried_shards`` (counted in ``rows``, not in ``resumed_rows``)."""
    shards: int = 0
    """Shards judged by this run."""
    seconds: float = 0.0
    """Wall time of the run, Ray start-up and engine loading included."""
    replicas: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per judge actor: rows, busy seconds (shard read + judge call + part write), the read and write part of
    them (``io_seconds``), rows/s while busy, and ``idle_seconds``: the time between the end of one of its
    shards and the start of the next (waiting for Ray to hand it a shard; start-up not included)."""
    pairs: int = 0
    """Preference pairs written (``pairs`` jobs)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Dropped candidate pairs by reason (``pairs`` jobs)."""
    output: str = ""
    """Where the rows are: the merged file, or the part folder."""

    def add(self, rec: dict[str, Any]) -> None:
        """Count one shard's record (as returned by a judge actor)."""
        import json

        n = int(rec["rows"])
        self.rows += n
        self.shards += 1
        for k in ("failed", "retried", "forced", "prompt_tokens", "completion_tokens", "pairs"):
            setattr(self, k, getattr(self, k) + int(rec[k]))
        self.ties += int(rec.get("ties", 0))
        self.backend_failed += int(rec.get("backend_failed", 0))
        for k, v in json.loads(rec["skipped"]).items():
            self.skipped[k] = self.skipped.get(k, 0) + int(v)
        r = self.replicas.setdefault(str(rec["replica"]), {"rows": 0, "seconds": 0.0, "io_seconds": 0.0,
                                                           "idle_seconds": 0.0, "rows_per_s": 0.0})
        r["rows"] += n
        r["seconds"] += float(rec["seconds"])
        r["io_seconds"] += float(rec.get("io_seconds", 0.0))
        r["idle_seconds"] += float(rec.get("idle_seconds", 0.0))
        if "baseline_seconds" in rec:  # BASELINE_HOOK (benchmarks)
            r["baseline_seconds"] = r.get("baseline_seconds", 0.0) + float(rec["baseline_seconds"])
        r["rows_per_s"] = r["rows"] / r["seconds"] if r["seconds"] > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return dataclasses.asdict(self)

    def text(self) -> str:
        """A few lines for a person."""
        rate = self.rows / self.seconds if self.seconds else 0.0
        lines = [f"judged {self.rows} rows in {self.shards} shards ({self.resumed_rows} resumed) in "
                 f"{self.seconds:.1f} s ({rate:.2f} rows/s) -> {self.output}"]
        if self.retried_shards:
            lines.append(f"  retried {self.retried_rows} rows in {self.retried_shards} shards whose backend had "
                         "failed before")
        lines += [f"  {self.failed} without a verdict (null score/winner, see judge_error), {self.retried} "
                  f"re-sampling rounds, {self.forced} forced verdicts" + (f", {self.ties} ties" if self.ties else ""),
                  f"  judge tokens: {self.prompt_tokens} prompt, {self.completion_tokens} generated"]
        if self.backend_failed:
            lines.append(f"  {self.backend_failed} of them because the judge backend failed (judge_error \"backend "
                         "failed: ...\"): run again with --resume (resume=True) to judge those shards again")
        if self.pairs or self.skipped:
            skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
            lines.append(f"  {self.pairs} pairs; skipped: {skipped}")
        for name, r in sorted(self.replicas.items()):
            lines.append(f"  replica {name}: {int(r['rows'])} rows, {r['rows_per_s']:.2f} rows/s while judging")
        return "\n".join(lines)
