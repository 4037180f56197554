"""What breaking ties of absolute grades costs: judge tokens per decided pair, and ties left.

Three ways to turn two absolute grades into a preference when they may be equal:

- ``resample``: grade both with one sample; re-grade tied pairs until one wins, at most ``rounds``
  times (``PrometheusJudge.compare_by_grades``);
- ``k_samples``: grade both with ``k`` samples in one request (n=k) and compare the mean scores;
- ``expected``: grade both with one sample and top-20 logprobs and compare expected scores
  (sum of s * P(s) at the verdict token).

For each: prompt and completion tokens spent per decided pair, the share of pairs left undecided
(still tied, or a failed grade), and wall time. Pairs come from a benchmark (default: Auto-J pairs
without a tie label).

``python -m benchmarks.tie_cost --judge SPEC [--bench autoj] [--limit 16] [--k 3] [--rounds 3]``

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["x [RESULT] 3"] * 4 + ["x [RESULT] 4", "x [RESULT] 2"])
    >>> r = tie_cost(judge, [("q", "a", "b")], strategies=("resample",), rounds=2)["resample"]
    >>> r["decided"], r["tie_left_rate"], r["tie_rounds"]
    (1, 0.0, 2)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prom_reward.core.judge import PrometheusJudge

STRATEGIES = ("resample", "k_samples", "expected")


def _summary(
    pairs: int, decided: int, prompt_tokens: int, completion_tokens: int, seconds: float, **extra: Any
) -> dict[str, Any]:
    tokens = prompt_tokens + completion_tokens
    return {
        "pairs": pairs,
        "decided": decided,
        "tie_left_rate": (pairs - decided) / pairs if pairs else None,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "tokens_per_decided_pair": tokens / decided if decided else None,
        "completion_tokens_per_decided_pair": completion_tokens / decided if decided else None,
        "seconds": round(seconds, 3),
        **extra,
    }


def _by_scores(grades: Sequence[Any], n: int, key: str) -> int:
    decided = 0
    for a, b in zip(grades[:n], grades[n:], strict=True):
        x, y = getattr(a, key), getattr(b, key)
        decided += x is not None and y is not None and x != y
    return decided


def tie_cost(
    judge: PrometheusJudge,
    pairs: Sequence[tuple[str, str, str]],
    rubric: Any = "helpfulness",
    *,
    strategies: Sequence[str] = STRATEGIES,
    k: int = 3,
    rounds: int = 3,
) -> dict[str, Any]:
    """Run each strategy on ``pairs`` of (instruction, response_a, response_b); one summary per strategy."""
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        from prom_reward.errors import ConfigError

        raise ConfigError(f"unknown tie strategies {bad}; valid: {', '.join(STRATEGIES)}")
    ins = [p[0] for p in pairs]
    a, b = [p[1] for p in pairs], [p[2] for p in pairs]
    n = len(pairs)
    both = list(rubric) * 2 if isinstance(rubric, (list, tuple)) else rubric  # rubric(s) for a + b
    out: dict[str, Any] = {}
    for s in strategies:
        # tokens from the judge's counters: they include every tie round, retry and forcing request
        # (a Verdict only carries the tokens of its deciding grades)
        t, p0, c0 = time.perf_counter(), judge.stats.prompt_tokens, judge.stats.completion_tokens

        def summary(decided: int, t: float = t, p0: int = p0, c0: int = c0, **extra: Any) -> dict[str, Any]:
            return _summary(
                n,
                decided,
                judge.stats.prompt_tokens - p0,
                judge.stats.completion_tokens - c0,
                time.perf_counter() - t,
                **extra,
            )

        if s == "resample":
            vs = judge.compare_by_grades(ins, a, b, rubric, max_tie_rounds=rounds, num_samples=1)
            out[s] = summary(
                sum(v.winner is not None for v in vs), rounds=rounds, tie_rounds=sum(v.tie_rounds for v in vs)
            )
        elif s == "k_samples":
            gs = judge.grade(ins + ins, a + b, both, num_samples=k)
            out[s] = summary(_by_scores(gs, n, "score"), k=k)
        else:
            gs = judge.grade(ins + ins, a + b, both, num_samples=1, sampling={"logprobs": 20})
            out[s] = summary(
                _by_scores(gs, n, "expected_score"), with_expected=sum(g.expected_score is not None for g in gs)
            )
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .judge_spec import build_judge, judge_label
    from .loaders import PairExample, load_bench, subset
    from .report import emit, versions

    ap = argparse.ArgumentParser(prog="python -m benchmarks.tie_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True)
    ap.add_argument("--server")
    ap.add_argument("--bench", default="autoj")
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    _, examples = load_bench(args.bench)
    pairs = [e for e in examples if isinstance(e, PairExample) and e.label != "tie"]
    chosen = subset(pairs, args.limit, args.seed)
    overrides = {"sampling": {"max_tokens": args.max_tokens}} if args.max_tokens else None
    judge = build_judge(args.judge, server=args.server, seed=args.seed, overrides=overrides)
    try:
        start = time.perf_counter()
        res = tie_cost(
            judge,
            [(e.instruction, e.response_1, e.response_2) for e in chosen],
            [e.rubric for e in chosen],
            k=args.k,
            rounds=args.rounds,
        )
    finally:
        judge.close()
    rec = {
        "benchmark": "tie_cost",
        "judge": judge_label(args.judge),
        "bench": args.bench,
        "pairs": len(chosen),
        "seed": args.seed,
        "sampling": judge.sampling.to_dict(),
        "force_verdict": judge.force_verdict,
        "results": res,
        "wall_s": round(time.perf_counter() - start, 3),
        "versions": versions(),
    }
    emit(rec, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
