"""Start-up of an in-process vLLM engine on the CPU build, eager (the default there) against compiled.

Each variant starts ``VLLMEngine`` on SmolLM2-135M-Instruct (``make setup``'s folder) in a fresh process and
grades one item, timed from the engine's construction to the first grade: what a user waits before a
``prom-reward grade --model ...`` judges its first row. Variants alternate (eager, compiled, eager, ...) so a
busy machine slows both alike; the record holds every run and the median ratio compiled / eager.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.cpu_engine_start --repeat 2 \\
        --out benchmarks/results/cpu_engine_start.json

Example (the ratio):
    >>> _ratio({"eager": [20.0, 22.0], "compiled": [60.0, 66.0]})
    3.0
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = "--child"


def _child(model: str, eager: bool) -> None:
    from prom_reward import PrometheusJudge

    t0 = time.perf_counter()
    judge = PrometheusJudge(model, enforce_eager=eager, max_model_len=2048, sampling={"max_tokens": 16})
    start = time.perf_counter() - t0
    grade = judge.grade(["What is 2 + 2?"], ["4"], "helpfulness")[0]
    first = time.perf_counter() - t0
    judge.close()
    print(json.dumps({"start_s": start, "first_grade_s": first, "scored": grade.score is not None}))


def _ratio(runs: dict[str, list[float]]) -> float:
    return statistics.median(runs["compiled"]) / statistics.median(runs["eager"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=2, help="runs of each variant, alternating (default 2)")
    p.add_argument("--out", help="write the record (JSON) here")
    args, rest = p.parse_known_args(argv)
    if rest[:1] == [CHILD]:
        _child(rest[1], rest[2] == "eager")
        return 0
    from prom_reward.local.models import ensure_smollm2

    model = str(ensure_smollm2())
    runs: dict[str, list[float]] = {"eager": [], "compiled": []}
    records = []
    for k in range(args.repeat):
        for variant in ("eager", "compiled"):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.cpu_engine_start", CHILD, model, variant],
                capture_output=True,
                text=True,
                check=True,
            )
            rec = {"variant": variant, "round": k, **json.loads(out.stdout.strip().splitlines()[-1])}
            records.append(rec)
            runs[variant].append(rec["first_grade_s"])
            print(f"{variant:9s} round {k}: start {rec['start_s']:.1f} s, first grade at {rec['first_grade_s']:.1f} s")
    ratio = _ratio(runs)
    print(
        f"median to the first grade: eager {statistics.median(runs['eager']):.1f} s, compiled "
        f"{statistics.median(runs['compiled']):.1f} s ({ratio:.2f}x)"
    )
    if args.out:
        load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None
        record = {
            "date": time.strftime("%Y-%m-%d"),
            "machine": platform.machine(),
            "loadavg_at_end": load,
            "model": "SmolLM2-135M-Instruct",
            "runs": records,
            "compiled_over_eager": ratio,
        }
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
