"""Meta-evaluation of a judge on a benchmark: ``run_meta_eval(judge, bench) -> record``.

Absolute benchmarks (Vicuna, MT-Bench, FLASK, Feedback Bench): every response is graded with
``samples`` samples; the mean judge score is correlated with the mean reference score (overall and
per category), Krippendorff's alpha measures agreement between the samples, plus the score
confusion matrix and the calibration of the expected score (when the judge returns logprobs).
Optionally (``transitivity``) every pair of responses to one instruction is compared directly and
the share of transitive triples is reported.

Pairwise benchmarks (Auto-J, HHH, MT-Bench human, Preference Bench) run in two modes:
``direct`` (Direct2Pair: both responses graded, higher grade wins, ties re-graded) and ``pair``
(Pair2Pair: the relative prompt, both orders judged for swap consistency). Responses are placed
as A/B by a seeded coin flip per pair, as in the Prometheus evaluation. Accuracies follow
``benchmarks.metrics.pairwise_accuracy``; for ``pair`` the papers' numbers use the first order
only (``acc_*``), the ``*_swap`` numbers count an order disagreement as a tie.

The record keeps every per-item prediction (``predictions``); ``report.write_outputs`` writes it
as JSON + JSONL + markdown + PNGs. With a judgment store on the judge, a rerun answers from the
store (items are judged ``batch_size`` at a time, so an interrupted run loses at most one batch).

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> from prom_reward.format.render import render_absolute
    >>> recs = [{"instruction": render_absolute("q", r, "helpfulness"), "gpt4_score": [s]}
    ...         for r, s in (("a", 1), ("b", 3), ("c", 5))]
    >>> judge = PrometheusJudge(backend="scripted", respond=lambda req, i: "Ok. [RESULT] " + "135"["abc".index(
    ...     req.user.split("###Response to evaluate:\\n")[1][0])])
    >>> rec = run_meta_eval(judge, recs, config=MetaEvalConfig(samples=1), bench_name="toy", layout="absolute")
    >>> round(rec["metrics"]["pearson"], 6), rec["metrics"]["failure_rate"]
    (1.0, 0.0)
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import ConfigError

from . import metrics as M
from .loaders import LAYOUTS, AbsoluteExample, PairExample, load_bench, subset

PAIR_MODES = ("direct", "pair")


@dataclass(frozen=True)
class MetaEvalConfig:
    """How a meta-evaluation run samples and what it measures."""

    samples: int = 3
    """Samples per absolute item (the papers use 3; Krippendorff's alpha is over them)."""
    modes: tuple[str, ...] = PAIR_MODES
    """Pairwise benchmarks: ``direct`` (Direct2Pair) and/or ``pair`` (Pair2Pair)."""
    swap: bool = True
    """Pair2Pair: judge both orders (swap consistency)."""
    max_tie_rounds: int = 2
    """Direct2Pair: re-grading rounds for tied grades (2 as in the Prometheus eval)."""
    limit: int | None = None
    """Judge at most this many items (a seeded subset; whole instruction groups for absolute)."""
    seed: int = 0
    """Seed of the subset and of the A/B placement."""
    batch_size: int = 64
    """Items per judge call (the unit a judgment store saves)."""
    transitivity: bool = False
    """Absolute benchmarks: also compare all response pairs per instruction (Pair2Pair, one order)."""

    def __post_init__(self) -> None:
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ConfigError(f"samples must be an int >= 1, got {self.samples!r}")
        object.__setattr__(self, "modes", tuple(self.modes))
        bad = [m for m in self.modes if m not in PAIR_MODES]
        if bad or not self.modes:
            raise ConfigError(f"modes must be a non-empty subset of {PAIR_MODES}, got {self.modes!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ConfigError(f"limit must be None or an int >= 1, got {self.limit!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"batch_size must be an int >= 1, got {self.batch_size!r}")
        if not isinstance(self.max_tie_rounds, int) or self.max_tie_rounds < 0:
            raise ConfigError(f"max_tie_rounds must be an int >= 0, got {self.max_tie_rounds!r}")


def _batches(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def _sample_stats(objs: Sequence[Any]) -> dict[str, Any]:
    n_samples = sum(len(o.samples) for o in objs)
    failures = sum(o.failures for o in objs)
    valid = n_samples - failures
    forced = sum(o.forced for o in objs)
    return {
        "samples": n_samples,
        "parse_failures": failures,
        "failure_rate": M.failure_rate(failures, n_samples),
        "forced": forced,
        "forced_rate": (forced / valid) if valid else None,
        "prompt_tokens": sum(o.prompt_tokens for o in objs),
        "completion_tokens": sum(o.completion_tokens for o in objs),
    }


def _absolute(judge: PrometheusJudge, ex: list[AbsoluteExample], cfg: MetaEvalConfig) -> tuple[dict, list]:
    grades: list[Any] = []
    for r in _batches(len(ex), cfg.batch_size):
        b = [ex[i] for i in r]
        grades += judge.grade(
            [e.instruction for e in b],
            [e.response for e in b],
            [e.rubric for e in b],
            [e.reference_answer for e in b],
            num_samples=cfg.samples,
        )
    pred = [g.score for g in grades]
    ref = [e.reference_score for e in ex]
    cats = [e.category for e in ex]
    m: dict[str, Any] = dict(M.correlations(pred, ref))
    m["exact_accuracy"] = M.exact_accuracy(pred, ref)
    m["per_category"] = M.by_group(cats, lambda p, r: M.correlations(p, r), pred, ref)
    ratings = [[g.scores[s] if len(g.scores) > s else None for g in grades] for s in range(cfg.samples)]
    m["krippendorff_alpha"] = M.krippendorff_alpha(ratings) if cfg.samples > 1 else None
    m["confusion"] = M.confusion_matrix(pred, ref)
    expected = [g.expected_score for g in grades]
    m["calibration"] = M.calibration(expected, ref) if any(e is not None for e in expected) else None
    m.update(_sample_stats(grades))
    preds = [
        {
            "id": e.id,
            "category": e.category,
            "reference": e.reference_score,
            "score": g.score,
            "scores": list(g.scores),
            "expected_score": g.expected_score,
            "failures": g.failures,
            "forced": g.forced,
            "outputs": list(g.raw_outputs),
        }
        for e, g in zip(ex, grades, strict=True)
    ]
    if cfg.transitivity:
        m["transitivity"] = _transitivity(judge, ex, cfg)
    return m, preds


def _transitivity(judge: PrometheusJudge, ex: list[AbsoluteExample], cfg: MetaEvalConfig) -> dict[str, Any]:
    groups: dict[str, list[AbsoluteExample]] = {}
    for e in ex:
        groups.setdefault(e.group, []).append(e)
    pairs = [
        (g, a, b) for g, items in groups.items() if len(items) >= 3 for i, a in enumerate(items) for b in items[i + 1 :]
    ]
    verdicts: list[Any] = []
    for r in _batches(len(pairs), cfg.batch_size):
        b = [pairs[i] for i in r]
        verdicts += judge.compare(
            [a.instruction for _, a, _ in b],
            [a.response for _, a, _ in b],
            [c.response for _, _, c in b],
            [a.rubric for _, a, _ in b],
            [a.reference_answer for _, a, _ in b],
        )
    rates, triples = [], 0
    for g in groups:
        t = M.transitivity({(a.id, b.id): v.winner for (gg, a, b), v in zip(pairs, verdicts, strict=True) if gg == g})
        if t["triples"]:
            rates.append(t["rate"] * t["triples"])
            triples += t["triples"]
    return {
        "rate": sum(rates) / triples if triples else None,
        "triples": triples,
        "pairs": len(pairs),
        "pair_failure_rate": _sample_stats(verdicts)["failure_rate"],
    }


def _pairwise(judge: PrometheusJudge, ex: list[PairExample], cfg: MetaEvalConfig) -> tuple[dict, list]:
    rng = random.Random(cfg.seed)
    switch = [rng.random() < 0.5 for _ in ex]
    a_resp = [e.response_2 if s else e.response_1 for e, s in zip(ex, switch, strict=True)]
    b_resp = [e.response_1 if s else e.response_2 for e, s in zip(ex, switch, strict=True)]
    labels = [
        "tie" if e.label == "tie" else ("A" if (e.label == "1") != s else "B") for e, s in zip(ex, switch, strict=True)
    ]
    cats = [e.category for e in ex]
    m: dict[str, Any] = {"n": len(ex), "tie_labels": labels.count("tie")}
    preds = [
        {"id": e.id, "category": e.category, "label": lab, "switched": s}
        for e, lab, s in zip(ex, labels, switch, strict=True)
    ]
    for mode in cfg.modes:
        out: list[Any] = []
        for r in _batches(len(ex), cfg.batch_size):
            args = (
                [ex[i].instruction for i in r],
                [a_resp[i] for i in r],
                [b_resp[i] for i in r],
                [ex[i].rubric for i in r],
                [ex[i].reference_answer for i in r],
            )
            out += (
                judge.compare_by_grades(*args, max_tie_rounds=cfg.max_tie_rounds)
                if mode == "direct"
                else judge.compare(*args, swap=cfg.swap)
            )
        mm: dict[str, Any] = {}
        if mode == "direct":
            first_tie = [v.tie_rounds > 0 or v.tie for v in out]
            p_wo = [v.winner for v in out]
            p_w = [
                "tie" if (lab == "tie" and ft) else v.winner for lab, ft, v in zip(labels, first_tie, out, strict=True)
            ]
            mm["tie_left_rate"] = sum(v.tie for v in out) / len(out) if out else None
        else:
            p_wo = [v.order_winners[0] if v.order_winners else None for v in out]
            p_w = p_wo
            if cfg.swap:
                both = ["tie" if v.tie else v.winner for v in out]
                mm["acc_wo_tie_swap"] = M.pairwise_accuracy(labels, both, with_tie=False)
                mm["acc_w_tie_swap"] = M.pairwise_accuracy(labels, both, with_tie=True)
                sc = M.swap_consistency([tuple(v.order_winners) for v in out])  # type: ignore[misc]
                mm["swap_consistency"], mm["swap_pairs"] = sc["rate"], sc["n"]
        mm["acc_wo_tie"] = M.pairwise_accuracy(labels, p_wo, with_tie=False)
        mm["acc_w_tie"] = M.pairwise_accuracy(labels, p_w, with_tie=True)
        mm["per_category_acc_wo_tie"] = M.by_group(
            cats, lambda lab, p: M.pairwise_accuracy(lab, p, with_tie=False), labels, p_wo
        )
        mm["pred_A_rate"] = sum(p == "A" for p in p_wo) / len(p_wo) if p_wo else None
        mm.update(_sample_stats(out))
        m[mode] = mm
        for p, v, w in zip(preds, out, p_wo, strict=True):
            p[mode] = {
                "winner": v.winner,
                "first_order": w,
                "tie": v.tie,
                "order_winners": list(v.order_winners),
                "tie_rounds": v.tie_rounds,
                "failures": v.failures,
                "forced": v.forced,
                "grades": [g.score for g in v.grades] if v.grades else None,
                "outputs": list(v.raw_outputs),
            }
    return m, preds


def run_meta_eval(
    judge: PrometheusJudge,
    bench: str | Sequence[Any],
    *,
    layout: str | None = None,
    rubric: str | None = None,
    config: MetaEvalConfig | None = None,
    bench_name: str | None = None,
    judge_name: str | None = None,
) -> dict[str, Any]:
    """Judge a benchmark (a name, a file path with ``layout``, or a list of raw records with ``layout``)
    and return the run record: ``judge, bench, layout, n_items, config, metrics, predictions, seed,
    samples, versions, wall_s, judge_stats``."""
    from .report import versions

    cfg = config or MetaEvalConfig()
    if isinstance(bench, str):
        layout, examples = load_bench(bench, layout=layout, rubric=rubric)
    else:
        if layout is None:
            raise ConfigError(f"records given directly need layout= (one of {', '.join(LAYOUTS.names())})")
        examples = LAYOUTS.get(layout)(list(bench), rubric)
    examples = subset(examples, cfg.limit, cfg.seed)
    stats_before = dataclasses.asdict(judge.stats)
    start = time.perf_counter()
    if examples and isinstance(examples[0], AbsoluteExample):
        kind, (metrics, preds) = "absolute", _absolute(judge, examples, cfg)  # type: ignore[arg-type]
    else:
        kind, (metrics, preds) = "pairwise", _pairwise(judge, examples, cfg)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    after = dataclasses.asdict(judge.stats)
    return {
        "judge": judge_name or getattr(judge.backend, "model", None) or judge.backend.name,
        "bench": bench_name or (bench if isinstance(bench, str) else "records"),
        "layout": layout,
        "kind": kind,
        "n_items": len(examples),
        "config": dataclasses.asdict(cfg),
        "seed": cfg.seed,
        "samples": cfg.samples,
        "judge_options": {
            "sampling": judge.sampling.to_dict(),
            "force_verdict": judge.force_verdict,
            "max_retries": judge.max_retries,
        },
        "metrics": metrics,
        "predictions": preds,
        "versions": versions(),
        "wall_s": round(wall, 3),
        "judge_stats": {k: after[k] - stats_before[k] for k in after if k != "counters"},
        "store": (
            {"hits": judge.backend.hits, "misses": judge.backend.misses} if hasattr(judge.backend, "hits") else None
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.meta_eval --judge SPEC --bench NAME|FILE [--layout L] [--limit N] ...``"""
    import argparse
    import json

    from prom_reward.errors import PromRewardError

    from .judge_spec import build_judge, judge_label
    from .report import markdown_table, write_outputs

    ap = argparse.ArgumentParser(prog="python -m benchmarks.meta_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True, help="preset name, model folder, or .yaml/.json of judge options")
    ap.add_argument("--server", help="OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1)")
    ap.add_argument("--bench", required=True, help="vicuna, autoj, hhh, mt_bench, ... or a file path")
    ap.add_argument("--layout", help=f"layout of a benchmark file: {', '.join(LAYOUTS.names())}")
    ap.add_argument("--rubric", help="rubric for layouts without one (autoj); default helpfulness")
    ap.add_argument("--limit", type=int, help="judge a seeded subset of this many items")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=3, help="samples per absolute item")
    ap.add_argument("--modes", default="direct,pair", help="pairwise modes: direct,pair")
    ap.add_argument("--no-swap", action="store_true", help="Pair2Pair: judge one order only")
    ap.add_argument("--transitivity", action="store_true", help="absolute benches: compare all pairs per instruction")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, help="judge max_tokens (feedback length)")
    ap.add_argument("--expected", action="store_true", help="request logprobs: expected scores + calibration plot")
    ap.add_argument("--store", help="SQLite judgment store: reruns resume from it")
    ap.add_argument("--out", default="outputs/meta_eval", help="folder for the record, table and plots")
    args = ap.parse_args(argv)
    try:
        cfg = MetaEvalConfig(
            samples=args.samples,
            modes=tuple(args.modes.split(",")),
            swap=not args.no_swap,
            limit=args.limit,
            seed=args.seed,
            batch_size=args.batch_size,
            transitivity=args.transitivity,
        )
        overrides: dict[str, Any] = {}
        if args.max_tokens:
            overrides["sampling"] = {"max_tokens": args.max_tokens}
        if args.expected:
            overrides["expected_score"] = True
        if args.store:
            overrides["store"] = args.store
        judge = build_judge(args.judge, server=args.server, seed=args.seed, overrides=overrides)
        try:
            bench_name = args.bench if args.layout is None else __import__("pathlib").Path(args.bench).stem
            record = run_meta_eval(
                judge,
                args.bench,
                layout=args.layout,
                rubric=args.rubric,
                config=cfg,
                bench_name=bench_name,
                judge_name=judge_label(args.judge),
            )
            stem = f"{record['bench']}_{record['judge']}" + (f"_limit{args.limit}" if args.limit else "")
            paths = write_outputs(record, args.out, stem)  # before close: engine shutdown can take a while
        finally:
            judge.close()
    except PromRewardError as e:
        print(f"error: {e}", file=__import__("sys").stderr)
        return 2
    print(markdown_table(record))
    print(json.dumps(paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
