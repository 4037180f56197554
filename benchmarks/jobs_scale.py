"""Scale of the job engine in one process: ``prom-reward grade`` on a large JSON-lines file against a judge
server that answers at once (``benchmarks.noop_server``), so what is measured is the engine's own cost.

For each size (``--rows``, and a tenth of it to show that memory does not grow with the file): the
peak RSS of the ``prom-reward grade`` process (``resource.getrusage`` in the child, which also covers
the input check, the part commits and the final merge) and its rows/s; then, on the largest file, the
cost of a resume: ``--resume`` on the finished output (nothing left to judge: the input check, the part
checks and the merge), and ``--resume`` after the last half of the parts was removed (a run killed half
way: half the rows judged again).

Example (minutes for a million rows; ``tests/benchmarks/test_jobs_benchmarks.py`` runs 300):
    $ python -m benchmarks.jobs_scale --rows 1000000 --batch-size 1000 --out benchmarks/results/jobs_scale_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.report import emit, versions

REPO = Path(__file__).resolve().parents[1]
PEAK_RSS = """
import resource, runpy, sys
sys.argv = ["prom-reward"] + sys.argv[1:]
try:
    runpy.run_module("prom_reward.cli", run_name="__main__")
finally:
    print("peak_rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""
FILLER = "The response explains each step, checks the arithmetic and states the result plainly. " * 4


def make_input(path: Path, rows: int) -> Path:
    """``rows`` grade rows (about 450 bytes each)."""
    with open(path, "w") as f:
        for i in range(rows):
            row = {"id": i, "instruction": f"What is {i} + {i}?", "response": f"{2 * i}. {FILLER}"}
            f.write(json.dumps(row) + "\n")
    return path


def grade(src: Path, out: Path, url: str, batch_size: int, *extra: str) -> dict[str, Any]:
    """One ``prom-reward grade`` process: wall seconds, peak RSS (MiB), its JSON summary."""
    cmd = [
        sys.executable,
        "-c",
        PEAK_RSS,
        "grade",
        str(src),
        "-o",
        str(out),
        "--rubric",
        "helpfulness",
        "--server",
        url,
        "--model",
        "noop-judge",
        "--batch-size",
        str(batch_size),
        "--quiet",
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"prom-reward grade failed ({done.returncode}): {done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    peak = int(done.stderr.rsplit("peak_rss_kb", 1)[1].split()[0]) / 1024
    return {
        "rows": summary["rows"],
        "wall_s": round(wall, 2),
        "rows_per_s": round(summary["rows"] / wall, 1),
        "peak_rss_mib": round(peak, 1),
        "summary": {k: summary[k] for k in ("rows", "resumed_rows", "failed", "output_rows", "batches", "seconds")},
    }


def run(rows: int, batch_size: int, tmp: Path, server_cpu: int | None = None) -> dict[str, Any]:
    """The measurements of the module doc, as one record."""
    from benchmarks.client_overhead import noop_server

    sizes = sorted({max(1, rows // 10), rows})
    record: dict[str, Any] = {"rows": rows, "batch_size": batch_size, "cpu_cores": os.cpu_count(), "runs": []}
    with noop_server(server_cpu) as url:
        for n in sizes:
            src = make_input(tmp / f"in{n}.jsonl", n)
            r = grade(src, tmp / f"out{n}.jsonl", url, batch_size)
            r["input_mib"] = round(src.stat().st_size / 2**20, 1)
            record["runs"].append(r)
        src, out = tmp / f"in{rows}.jsonl", tmp / f"out{rows}.jsonl"
        record["resume_nothing_left"] = grade(src, out, url, batch_size, "--resume")
        parts = sorted((tmp / f"out{rows}.jsonl.parts").glob("part-*"))
        for p in parts[len(parts) // 2 :]:  # as if killed half way
            p.unlink()
        record["resume_half_left"] = grade(src, out, url, batch_size, "--resume")
        lines = sum(1 for _ in open(out))
        record["output_rows_after_resume"] = lines
    small, large = record["runs"][0], record["runs"][-1]
    record["peak_rss_growth_mib"] = round(large["peak_rss_mib"] - small["peak_rss_mib"], 1)
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--server-cpu", type=int, help="pin the no-op server to this core")
    p.add_argument("--out", help="write the record (JSON) here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        record = run(args.rows, args.batch_size, Path(d), args.server_cpu)
    emit({**record, "date": time.strftime("%Y-%m-%d"), "versions": versions()}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
