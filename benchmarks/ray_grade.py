"""Throughput and driver memory of ``grade_dataset`` (judging on Ray Data) against one in-process call.

Three measurements, one run:

1. ``engine``: the same rows, engine settings and greedy sampling through one
   ``PrometheusJudge.grade`` call on a freshly built in-process vLLM engine (its first call, as a
   replica's first shard is), and through ``grade_dataset``
   with one replica (one shard, and four shards). Reported: rows/s of the in-process call; the
   Ray replica's rows/s while judging (read + judge + write of its shards) and the ratio of the
   two; the Ray job's end-to-end wall time (Ray start, actor and engine start-up included).
2. ``scaling``: the same with ``--replicas`` replicas (a 2-core machine has no second core to
   give a second CPU engine: the figure then says so rather than scale).
3. ``memory``: ``--noop-rows`` rows (1,000,000 by default) from a JSONL file through replicas
   with a no-op backend (``benchmarks.overhead.NoOpBackend``); the driver's peak RSS before and
   after shows it streams (the driver never holds the file or the graded rows).

``python -m benchmarks.ray_grade [--model DIR] [--rows 200] [--max-tokens 8] [--replicas 2]
[--noop-rows 1000000] [--skip-engine] [--out FILE]`` (without ``--model``: the tiny random Llama
of the tests, built from SmolLM2's tokenizer).

Example (needs Ray, vLLM and minutes):
    >>> r = run(rows=40, noop_rows=1000)  # doctest: +SKIP
    >>> r["engine"]["ratio_one_shard"] > 0.9  # doctest: +SKIP
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
            f.write(json.dumps({"instruction": f"What is {i} + {i}? Answer briefly.", "response": f"It is {2 * i}.",
                                "id": i}) + "\n")
    return path


def _ray_job(src: Path, out: Path, judge: dict[str, Any], **options: Any) -> dict[str, Any]:
    from prom_reward.integrations.ray_grade import grade_dataset

    t = time.perf_counter()
    s = grade_dataset(str(src), out, judge=judge, rubric="helpfulness", progress=False, **options)
    wall = time.perf_counter() - t
    busy = sum(r["seconds"] for r in s.replicas.values())
    return {"rows": s.rows, "wall_s": round(wall, 2), "rows_per_s_wall": round(s.rows / wall, 2),
            "rows_per_s_per_replica_judging": round(s.rows / busy * len(s.replicas), 2) if busy else None,
            "rows_per_s_judging_all_replicas": round(s.rows / max(r["seconds"] for r in s.replicas.values()), 2),
            "replicas": len(s.replicas), "shards": s.shards, "failed": s.failed}


def engine_comparison(model: str, rows: int, max_tokens: int, replicas: int, tmp: Path) -> dict[str, Any]:
    """In-process ``grade`` vs ``grade_dataset`` on the same rows and engine settings."""
    from prom_reward.io import read_rows
    from prom_reward.judge import PrometheusJudge

    judge = dict(model=model, backend="vllm", max_model_len=4096, enforce_eager=True, seed=0, force_verdict=True,
                 max_retries=0, sampling={"max_tokens": max_tokens, "temperature": 0.0})
    src = _write_rows(tmp / "engine.jsonl", rows)
    data = list(read_rows(src))
    local = PrometheusJudge(**judge)  # timed from its first call, cold like a fresh replica's first shard
    t = time.perf_counter()
    local.grade([r["instruction"] for r in data], [r["response"] for r in data], "helpfulness")
    local_rate = rows / (time.perf_counter() - t)
    local.close()
    one = _ray_job(src, tmp / "one", judge, rows_per_shard=rows)
    four = _ray_job(src, tmp / "four", judge, rows_per_shard=max(1, rows // 4))
    scaled = _ray_job(src, tmp / "scaled", judge, rows_per_shard=max(1, rows // (2 * replicas)), replicas=replicas)
    return {"rows": rows, "max_tokens": max_tokens, "in_process_rows_per_s": round(local_rate, 2),
            "ray_one_shard": one, "ray_four_shards": four, f"ray_{replicas}_replicas": scaled,
            "ratio_one_shard": round(one["rows_per_s_per_replica_judging"] / local_rate, 3),
            "ratio_four_shards": round(four["rows_per_s_per_replica_judging"] / local_rate, 3),
            "scaling_vs_one_replica_four_shards": round(
                scaled["rows_per_s_judging_all_replicas"] / four["rows_per_s_judging_all_replicas"], 3),
            "cpu_cores": os.cpu_count()}


def driver_memory(rows: int, replicas: int, tmp: Path) -> dict[str, Any]:
    """Peak driver RSS over a ``rows``-row file judged by a no-op backend."""
    from benchmarks.overhead import NoOpBackend

    src = _write_rows(tmp / "noop.jsonl", rows)
    before = _rss_mib()
    r = _ray_job(src, tmp / "noop-out", {"backend": NoOpBackend()}, rows_per_shard=max(1000, rows // 200),
                 replicas=replicas)
    return {**r, "input_mib": round(src.stat().st_size / 2**20, 1), "driver_peak_rss_mib_before": round(before, 1),
            "driver_peak_rss_mib_after": round(_rss_mib(), 1)}


def run(model: str | None = None, rows: int = 200, max_tokens: int = 8, replicas: int = 2,
        noop_rows: int = 1_000_000, skip_engine: bool = False) -> dict[str, Any]:
    """All three measurements (see the module doc)."""
    import ray

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="ray-grade-bench-"))
    if model is None and not skip_engine:
        from prom_reward.models import build_tiny_llama, ensure_smollm2

        model = str(build_tiny_llama(tmp / "tiny", tokenizer_from=ensure_smollm2()))
    ray.init(num_cpus=max(2, replicas), include_dashboard=False, log_to_driver=False)
    out: dict[str, Any] = {}
    if not skip_engine:
        out["engine"] = engine_comparison(str(model), rows, max_tokens, replicas, tmp)
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
    p.add_argument("--out")
    a = p.parse_args()
    r = run(a.model, a.rows, a.max_tokens, a.replicas, a.noop_rows, a.skip_engine)
    text = json.dumps(r, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
