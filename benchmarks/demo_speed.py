"""Judging speed of the demo's judge settings: judgments/s and judge tokens/s on the 8 sample rollouts.

Each judge runs in a fresh process (engine start excluded from the timing), with the demo's settings:
one batch, ``expected_score=True`` (top-20 logprobs), ``max_model_len=4096``, eager mode, 512 new
tokens for pocket judges. ``--float32-pocket`` also builds the pocket judge stored in float32 (how it
was shipped before: vLLM cast it to bf16 at load, with a warning per tensor) to compare with the bf16
folder ``make setup`` builds now. README's demo figures come from:

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.demo_speed --float32-pocket

Example (the table's format):
    >>> _row({"judge": "pocket-judge", "jps": 0.66, "tok_s": 82.5, "grade_s": 12.1, "start_s": 23.7,
    ...       "warnings": 0})
    'pocket-judge                         0.66 judgments/s   82.5 tok/s  grade 12.1s  start 23.7s  dtype warnings 0'
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = "--child"


def _child(model: str) -> None:
    from prom_reward import PrometheusJudge
    from prom_reward.cli.demo import load_sample_rollouts

    rows = load_sample_rollouts()
    t0 = time.perf_counter()
    judge = PrometheusJudge(
        model=model,
        sampling={"max_tokens": 512} if "pocket" in model else None,
        expected_score=True,
        max_model_len=4096,
        enforce_eager=True,
        seed=0,
    )
    t1 = time.perf_counter()
    grades = judge.grade(
        [r["instruction"] for r in rows],
        [r["response"] for r in rows],
        [r["rubric"] for r in rows],
        [r.get("reference_answer") for r in rows],
    )
    t2 = time.perf_counter()
    s = judge.stats
    print(
        "RESULT "
        + json.dumps(
            {
                "judge": model,
                "start_s": round(t1 - t0, 1),
                "grade_s": round(t2 - t1, 1),
                "tokens": s.completion_tokens,
                "tok_s": round(s.completion_tokens / (t2 - t1), 1),
                "jps": round(len(rows) / (t2 - t1), 3),
                "scores": [g.score for g in grades],
            }
        ),
        flush=True,
    )
    judge.close()


def float32_pocket(out: Path) -> Path:
    """The pocket judge merged into a float32 folder (the shipped merge with ``dtype: float32``)."""
    import yaml

    from prom_reward.local.models import ensure_smollm2
    from train_judge.pocket_judge import MERGE_FILE, merge_experts_onto, pocket_adapter_dir

    src = out / "recipe"
    shutil.copytree(pocket_adapter_dir(), src, ignore=shutil.ignore_patterns("__pycache__"))
    spec = yaml.safe_load((src / MERGE_FILE).read_text())
    (src / MERGE_FILE).write_text(yaml.safe_dump({**spec, "dtype": "float32"}))
    merge_experts_onto(ensure_smollm2(), src, out / "pocket-judge-float32")
    return out / "pocket-judge-float32"


def run(model: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.demo_speed", CHILD, model], capture_output=True, text=True, timeout=1800
    )
    text = proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{model}: the judge run failed:\n{text[-3000:]}")
    return {**json.loads(line[len("RESULT ") :]), "warnings": text.count("Attempted to load weight")}


def _row(r: dict[str, Any]) -> str:
    return (
        f"{r['judge']:<34} {r['jps']:>6.2f} judgments/s {r['tok_s']:>6.1f} tok/s  grade {r['grade_s']:.1f}s  "
        f"start {r['start_s']:.1f}s  dtype warnings {r['warnings']}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["pocket-judge", "smollm2-135m-instruct"])
    ap.add_argument("--float32-pocket", action="store_true", help="also the pocket judge stored in float32")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    models = list(args.models)
    with tempfile.TemporaryDirectory(prefix="demo-speed-") as tmp:
        if args.float32_pocket:
            models.insert(0, str(float32_pocket(Path(tmp))))
        results = [run(m) for m in models]
    for r in results:
        print(_row(r))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        _child(sys.argv[2])
    else:
        main()
