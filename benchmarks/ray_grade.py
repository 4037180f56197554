"""Throughput and driver memory of ``grade_file(ray=...)`` (judging on Ray Data) against one in-process call.

Four measurements, one run:

0. ``same_engine`` (the overhead ratio): one ``grade_file(ray=...)`` job, one replica, ``--shards``
   shards, with ``jobs.batch.BASELINE_HOOK`` set: the replica warms its engine up on a few rows
   (untimed), then for every shard also times one plain ``PrometheusJudge.grade`` call on the
   shard's rows on the same engine, right before (odd shards) or after (even shards) the pipeline's
   own work on it. Ratio: baseline seconds / pipeline seconds (shard read + judge call + part write
   + the replica's idle time between shards), i.e. the pipeline's rows/s over the plain call's on
   the same engine, rows and minute of machine load (prefix caching off, so the second call
   gains nothing from the first).
1. ``engine``: the same rows, engine settings and greedy sampling through one
   ``PrometheusJudge.grade`` call on a freshly built in-process vLLM engine (after
   ``ray_grade.warm_up``, as a replica does when it starts; timed before and after the Ray jobs,
   the mean reported), and through ``grade_file(ray=...)``
   with one replica (one shard, and four shards). Reported: rows/s of the in-process call; the
   Ray replica's rows/s while judging (read + judge + write of its shards) and the ratio of the
   two; the Ray job's end-to-end wall time (Ray start, actor and engine start-up included).
2. ``scaling``: the same with ``--replicas`` replicas (a 2-core machine has no second core to
   give a second CPU engine: the figure then says so rather than scale).
3. ``memory``: ``--noop-rows`` rows (1,000,000 by default) from a JSONL file through replicas
   with a no-op backend (``benchmarks.overhead.NoOpBackend``); the driver's peak RSS before and
   after shows it streams (the driver never holds the file or the graded rows).

``python -m benchmarks.ray_grade [--model DIR] [--rows 200] [--max-tokens 8] [--replicas 2]
[--shards 4] [--noop-rows 1000000] [--skip-engine] [--only-same-engine] [--out FILE]`` (``--replicas 1``
skips the scaling run) (without ``--model``: the tiny random Llama
of the tests, built from SmolLM2's tokenizer).

Example (needs Ray, vLLM and minutes):
    >>> r = run(rows=40, noop_rows=1000)  # doctest: +SKIP
    >>> r["same_engine"]["ratio"] > 0.9  # doctest: +SKIP
    True
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write_rows(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {"instruction": f"What is {i} + {i}? Answer briefly.", "response": f"It is {2 * i}.", "id": i}
                )
                + "\n"
            )
    return path


def _ray_job(src: Path, out: Path, judge: dict[str, Any], **options: Any) -> dict[str, Any]:
    from prom_reward.jobs.run import grade_file

    t = time.perf_counter()
    s = grade_file(str(src), out, judge, rubric="helpfulness", progress=False, overwrite=True, ray=True, **options)
    wall = time.perf_counter() - t
    busy = sum(r["seconds"] for r in s.workers.values())
    idle = sum(r.get("idle_seconds", 0.0) for r in s.workers.values())
    return {
        "rows": s.rows,
        "wall_s": round(wall, 2),
        "rows_per_s_wall": round(s.rows / wall, 2),
        "rows_per_s_per_replica_judging": round(s.rows / busy * len(s.workers), 2) if busy else None,
        "rows_per_s_judging_all_replicas": round(s.rows / max(r["seconds"] for r in s.workers.values()), 2),
        "busy_s": round(busy, 2),
        "io_s": round(sum(r["io_seconds"] for r in s.workers.values()), 3),
        "idle_between_shards_s": round(idle, 3),
        "baseline_s": round(sum(r.get("baseline_seconds", 0.0) for r in s.workers.values()), 2),
        "replicas": len(s.workers),
        "shards": s.batches,
        "failed": s.failed,
    }


def _judge_options(model: str, max_tokens: int) -> dict[str, Any]:
    return dict(
        model=model,
        backend="vllm",
        max_model_len=4096,
        enforce_eager=True,
        seed=0,
        force_verdict="always",
        max_retries=0,
        enable_prefix_caching=False,
        sampling={"max_tokens": max_tokens, "temperature": 0.0},
    )


def same_engine(model: str, rows: int, max_tokens: int, shards: int, tmp: Path) -> dict[str, Any]:
    """The pipeline against plain ``grade`` calls on the replica's own engine (``BASELINE_HOOK``)."""
    from prom_reward.jobs.batch import BASELINE_HOOK

    src = _write_rows(tmp / "same.jsonl", rows)
    r = _ray_job(
        src,
        tmp / "same",
        _judge_options(model, max_tokens),
        batch_size=max(1, rows // shards),
        env={BASELINE_HOOK: "1"},
    )
    pipeline = r["busy_s"] + r["idle_between_shards_s"]
    return {
        **r,
        "pipeline_s": round(pipeline, 2),
        "plain_grade_rows_per_s": round(rows / r["baseline_s"], 2),
        "pipeline_rows_per_s": round(rows / pipeline, 2),
        "ratio": round(r["baseline_s"] / pipeline, 3),
        "ratio_busy_only": round(r["baseline_s"] / r["busy_s"], 3),
        "cpu_cores": os.cpu_count(),
    }


def engine_comparison(model: str, rows: int, max_tokens: int, replicas: int, tmp: Path) -> dict[str, Any]:
    """In-process ``grade`` vs ``grade_file(ray=...)`` on the same rows and engine settings."""
    from prom_reward.core.judge import PrometheusJudge
    from prom_reward.jobs.batch import warm_up
    from prom_reward.jobs.source import read_rows

    judge = _judge_options(model, max_tokens)
    src = _write_rows(tmp / "engine.jsonl", rows)
    data = list(read_rows(src))
    local = PrometheusJudge(**judge)  # warmed up like a replica at its start (ray_grade.warm_up), then timed
    warm_up(local)

    def timed() -> float:
        t = time.perf_counter()
        local.grade([r["instruction"] for r in data], [r["response"] for r in data], "helpfulness")
        return rows / (time.perf_counter() - t)

    before = timed()  # the in-process engine is timed before and after the Ray jobs (it idles meanwhile),
    one = _ray_job(src, tmp / "one", judge, batch_size=rows)  # so a drift of the machine's load
    four = _ray_job(src, tmp / "four", judge, batch_size=max(1, rows // 4))  # weighs on both sides
    after = timed()
    local.close()
    local_rate = (before + after) / 2
    out = {
        "rows": rows,
        "max_tokens": max_tokens,
        "in_process_rows_per_s": round(local_rate, 2),
        "in_process_rows_per_s_before_after": [round(before, 2), round(after, 2)],
        "ray_one_shard": one,
        "ray_four_shards": four,
        "ratio_one_shard": round(one["rows_per_s_per_replica_judging"] / local_rate, 3),
        "ratio_four_shards": round(four["rows_per_s_per_replica_judging"] / local_rate, 3),
        "cpu_cores": os.cpu_count(),
    }
    if replicas > 1:
        scaled = _ray_job(src, tmp / "scaled", judge, batch_size=max(1, rows // (2 * replicas)), replicas=replicas)
        out[f"ray_{replicas}_replicas"] = scaled
        out["scaling_vs_one_replica_four_shards"] = round(
            scaled["rows_per_s_judging_all_replicas"] / four["rows_per_s_judging_all_replicas"], 3
        )
    return out


def driver_memory(rows: int, replicas: int, tmp: Path) -> dict[str, Any]:
    """Peak driver RSS over a ``rows``-row file judged by a no-op backend."""
    from benchmarks.overhead import NoOpBackend

    src = _write_rows(tmp / "noop.jsonl", rows)
    before = _rss_mib()
    r = _ray_job(
        src, tmp / "noop-out", {"backend": NoOpBackend()}, batch_size=max(1000, rows // 200), replicas=replicas
    )
    return {
        **r,
        "input_mib": round(src.stat().st_size / 2**20, 1),
        "driver_peak_rss_mib_before": round(before, 1),
        "driver_peak_rss_mib_after": round(_rss_mib(), 1),
    }


def run(
    model: str | None = None,
    rows: int = 200,
    max_tokens: int = 8,
    replicas: int = 2,
    noop_rows: int = 1_000_000,
    skip_engine: bool = False,
    shards: int = 4,
    only_same_engine: bool = False,
) -> dict[str, Any]:
    """All three measurements (see the module doc)."""
    import ray

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="ray-grade-bench-"))
    if model is None and not skip_engine:
        from benchmarks.tiny_llama import build_tiny_llama
        from prom_reward.local.models import ensure_smollm2

        model = str(build_tiny_llama(tmp / "tiny", tokenizer_from=ensure_smollm2()))
    ray.init(num_cpus=max(2, replicas), include_dashboard=False, log_to_driver=False)
    out: dict[str, Any] = {}
    if not skip_engine:
        out["same_engine"] = same_engine(str(model), rows, max_tokens, shards, tmp)
        if not only_same_engine:
            out["engine"] = engine_comparison(str(model), rows, max_tokens, replicas, tmp)
    if not only_same_engine:
        out["memory"] = driver_memory(noop_rows, replicas, tmp)
    ray.shutdown()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model")
    p.add_argument("--rows", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--noop-rows", type=int, default=1_000_000)
    p.add_argument("--skip-engine", action="store_true")
    p.add_argument("--shards", type=int, default=4, help="shards of the same-engine run (--rows in all)")
    p.add_argument("--only-same-engine", action="store_true", help="only the same-engine overhead ratio")
    p.add_argument("--out")
    a = p.parse_args()
    r = run(a.model, a.rows, a.max_tokens, a.replicas, a.noop_rows, a.skip_engine, a.shards, a.only_same_engine)
    text = json.dumps(r, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
