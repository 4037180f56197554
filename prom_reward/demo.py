"""``make demo``: grade the sample rollouts shipped with the package and print rewards.

Runs the embedded vLLM engine on the default judge, the pocket judge: SmolLM2-135M-Instruct
fine-tuned with ``train_judge`` on the pocket Feedback Collection (``make setup`` applies the
shipped update). It writes ``Feedback: ... [RESULT] k`` on its own (no forced verdicts); at
135M parameters its grades correlate only weakly with GPT-4's (see ``train_judge/README.md``).
On a GPU box pass a real judge:

    python -m prom_reward.demo --model prometheus-eval/prometheus-7b-v2.0

``--model smollm2-135m-instruct`` runs the untrained base (verdicts forced).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib import resources
from typing import Any


def load_sample_rollouts() -> list[dict[str, Any]]:
    """The demo rollouts: instruction, response, optional reference_answer, rubric name."""
    text = resources.files("prom_reward").joinpath("assets/sample_rollouts.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _snippet(text: str | None, width: int) -> str:
    flat = " ".join((text or "-").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="pocket-judge", help="preset, hub id or folder")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--num-samples", type=int, default=1)
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep the table readable

    from prom_reward import PrometheusJudge

    rows = load_sample_rollouts()
    sampling = {"max_tokens": args.max_tokens} if args.max_tokens else None
    t0 = time.perf_counter()
    judge = PrometheusJudge(model=args.model, sampling=sampling, expected_score=True,
                            num_samples=args.num_samples, max_model_len=4096, enforce_eager=True)
    t_load = time.perf_counter() - t0
    t1 = time.perf_counter()
    grades = judge.grade([r["instruction"] for r in rows], [r["response"] for r in rows],
                         [r["rubric"] for r in rows], [r.get("reference_answer") for r in rows])
    elapsed = time.perf_counter() - t1

    print(f"\njudge: {args.model}  (engine start {t_load:.1f}s)")
    print(f"{'#':>2}  {'rubric':<16} {'score':>5} {'E[score]':>8} {'forced':>6}  response / judge feedback")
    for i, (r, g) in enumerate(zip(rows, grades)):
        score = "None" if g.score is None else f"{g.score:.1f}"
        exp = "-" if g.expected_score is None else f"{g.expected_score:.2f}"
        print(f"{i:>2}  {r['rubric']:<16} {score:>5} {exp:>8} {g.forced:>6}  {_snippet(r['response'], 60)}")
        print(f"{'':>36}feedback: {_snippet(g.feedback, 90)}")
    s = judge.stats
    print(f"\n{len(rows)} judgments in {elapsed:.1f}s = {len(rows) / elapsed:.2f} judgments/s; "
          f"{s.completion_tokens} judge tokens ({s.completion_tokens / elapsed:.0f} tok/s); "
          f"parse failures {s.parse_failures}, forced verdicts {s.forced}, retries {s.retries}")
    judge.close()


if __name__ == "__main__":
    main()
