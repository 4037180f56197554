"""Confidence evaluation: do the indicators find the judge's bad judgments, and what does a cascade buy?

Two steps:

``run``: judge a subset of ``vicuna_eval.json`` with a primary judge (``confidence=True``,
optionally a calibration base model for SE-Cali) and replay the recorded GPT-4 judgment of
every item as the REFERENCE REPLAY fallback; one JSON line per item (``id``, ``reference`` =
mean of the three GPT-4 scores, ``primary``, ``fallback`` = the first recorded GPT-4 score,
``confidence`` = the primary's indicators). Items already in the output file are skipped, so
an interrupted run resumes without recomputing.

``evaluate``: for each indicator (``random`` and those of ``prom_reward.confidence``):

- the metric (Pearson r with the reference, also Spearman) of the *confident half* vs the
  *unsure half* of the items the primary judged (split at the median uncertainty);
- the cascade curve: the metric when the most uncertain share ``f`` of items (f = 0 .. 1) take
  the fallback's score, selected by ``prom_reward.cascade.route`` (the rule ``CascadeJudge``
  uses; failed primary items always take the fallback).

Example (records made by hand):
    >>> recs = [{"id": i, "reference": r, "primary": p, "fallback": r, "confidence": {"entropy": e}}
    ...         for i, (r, p, e) in enumerate([(1, 1, .1), (2, 2, .2), (3, 5, .9), (4, 4, .3)])]
    >>> [round(x, 3) for x in cascade_curve(recs, "se", [0.0, 0.25])]
    [0.849, 1.0]

Usage (SmolLM2 as primary, forced verdicts, 16 items)::

    python -m benchmarks.confidence_eval run --judge-model ~/.cache/prom_reward/SmolLM2-135M-Instruct \\
        --limit 16 --out /tmp/conf.jsonl
    python -m benchmarks.confidence_eval evaluate /tmp/conf.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path
from statistics import fmean
from typing import Any, Callable, Sequence

from prom_reward.cascade import CascadeConfig, route
from prom_reward.confidence import INDICATORS, Confidence
from prom_reward.results import Grade

FRACTIONS = [i / 10 for i in range(11)]
METRICS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {}


def _corr(kind: str) -> Callable[[Sequence[float], Sequence[float]], float]:
    def f(x: Sequence[float], y: Sequence[float]) -> float:
        from scipy import stats

        if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
            return math.nan
        return float(getattr(stats, kind)(x, y)[0])
    return f


METRICS["pearson"] = _corr("pearsonr")
METRICS["spearman"] = _corr("spearmanr")
METRICS["kendall"] = _corr("kendalltau")


def _confidence(rec: dict[str, Any]) -> Confidence:
    known = {k: v for k, v in (rec.get("confidence") or {}).items() if k in Confidence.__dataclass_fields__}
    return Confidence(**known)


def uncertainties(records: Sequence[dict[str, Any]], indicator: str, seed: int = 0) -> list[float | None]:
    """Per record, the primary's uncertainty (``random``: a seeded uniform draw; None when failed/unknown)."""
    if indicator == "random":
        rng = random.Random(seed)
        return [rng.random() if r["primary"] is not None else None for r in records]
    measure = INDICATORS.get(indicator)
    return [measure(_confidence(r)) if r["primary"] is not None else None for r in records]


def halves(records: Sequence[dict[str, Any]], indicator: str, metric: str = "pearson") -> tuple[float, float, int]:
    """(metric of the confident half, metric of the unsure half, items per half) over records the
    primary judged and the indicator scored; the odd middle item goes to the unsure half.

    >>> recs = [{"id": i, "reference": r, "primary": p, "confidence": {"entropy": e}}
    ...         for i, (r, p, e) in enumerate([(1, 1, .1), (2, 2, .2), (3, 3, .3), (1, 5, .8), (5, 1, .9), (3, 2, .7)])]
    >>> [round(x, 4) for x in halves(recs, "se")]
    [1.0, -0.9608, 3]
    """
    values = uncertainties(records, indicator)
    scored = sorted((v, i) for i, v in enumerate(values) if v is not None)
    half = len(scored) // 2
    f = METRICS[metric]

    def score(part: Sequence[tuple[float, int]]) -> float:
        return f([records[i]["primary"] for _, i in part], [records[i]["reference"] for _, i in part])

    return score(scored[:half]), score(scored[half:]), half


def cascade_curve(records: Sequence[dict[str, Any]], indicator: str, fractions: Sequence[float] = FRACTIONS,
                  metric: str = "pearson") -> list[float]:
    """The metric of the cascade's scores at each routed fraction (routing by ``cascade.route``)."""
    values = uncertainties(records, indicator)
    grades = [Grade(r["primary"], confidence=Confidence(entropy=v)) for r, v in zip(records, values)]
    out = []
    for frac in fractions:
        routing = route(grades, CascadeConfig(route_fraction=frac, indicator="se"))
        scores = [r["fallback"] if how.routed else r["primary"] for r, how in zip(records, routing)]
        pairs = [(s, r["reference"]) for s, r in zip(scores, records) if s is not None]
        out.append(METRICS[metric]([p for p, _ in pairs], [q for _, q in pairs]))
    return out


def available_indicators(records: Sequence[dict[str, Any]]) -> list[str]:
    """``random`` plus every indicator with a value on at least half of the judged records."""
    judged = [r for r in records if r["primary"] is not None]
    names = ["random"]
    for name in INDICATORS.names():
        known = sum(v is not None for v in uncertainties(judged, name))
        if judged and known >= len(judged) / 2:
            names.append(name)
    return names


def report(records: Sequence[dict[str, Any]], fractions: Sequence[float] = FRACTIONS) -> str:
    """Markdown tables: halves per indicator, then the cascade curve per indicator."""
    judged = sum(r["primary"] is not None for r in records)
    lines = [f"{len(records)} items, {judged} judged by the primary; reference = mean recorded GPT-4 score; "
             "fallback = REFERENCE REPLAY of the first recorded GPT-4 judgment", "",
             "| indicator | Pearson confident half | Pearson unsure half | Spearman confident | Spearman unsure | "
             "items per half |", "|---|---|---|---|---|---|"]
    names = available_indicators(records)
    for name in names:
        pc, pu, n = halves(records, name, "pearson")
        sc, su, _ = halves(records, name, "spearman")
        lines.append(f"| {name} | {pc:.3f} | {pu:.3f} | {sc:.3f} | {su:.3f} | {n} |")
    lines += ["", "| indicator | " + " | ".join(f"{f:.0%}" for f in fractions) + " |",
              "|---|" + "---|" * len(fractions)]
    for name in names:
        curve = cascade_curve(records, name, fractions)
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in curve) + " |")
    return "\n".join(lines)


# -- running a judge ---------------------------------------------------------------------------------
def _done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def run(args: argparse.Namespace) -> None:
    from prom_reward import PrometheusJudge
    from prom_reward.backends.reference_replay import ReferenceReplayBackend, _list
    from prom_reward.prompts import parse_absolute_prompt

    data = Path(args.data)
    rows = json.loads(data.read_text(encoding="utf-8"))[args.offset:args.offset + args.limit]
    out = Path(args.out)
    done = _done_ids(out)
    todo = [r for r in rows if f"{r['idx']}/{r['response_source']}" not in done]
    print(f"{len(rows)} items, {len(done)} already in {out}, judging {len(todo)}")
    if not todo:
        return
    calibration = None
    if args.base_model:
        calibration = {"backend": "vllm", "model": args.base_model, "max_model_len": 4096, "enforce_eager": True,
                       "wire": args.base_wire}
    primary = PrometheusJudge(args.judge_model, backend="vllm", confidence=True, calibration=calibration,
                              force_verdict=True, max_retries=args.max_retries,
                              sampling={"max_tokens": args.max_tokens, "temperature": args.temperature},
                              max_model_len=4096, enforce_eager=True)
    reference = PrometheusJudge(backend=ReferenceReplayBackend.from_vicuna_eval(data), neutralize_markers=False,
                                max_retries=0)
    try:
        for start in range(0, len(todo), args.batch_size):
            chunk = todo[start:start + args.batch_size]
            parts = [parse_absolute_prompt(r["instruction"]) for r in chunk]
            batch = ([p.instruction for p in parts], [p.response for p in parts], [p.rubric for p in parts],
                     [p.reference_answer for p in parts])
            mine, ref = primary.grade(*batch), reference.grade(*batch)
            with out.open("a", encoding="utf-8") as f:
                for r, g, h in zip(chunk, mine, ref):
                    f.write(json.dumps({
                        "id": f"{r['idx']}/{r['response_source']}",
                        "reference": fmean(float(s) for s in _list(r["gpt4_score"])),
                        "primary": g.score, "fallback": h.score,
                        "confidence": g.confidence.as_dict() if g.confidence else None,
                    }) + "\n")
            print(f"judged {start + len(chunk)}/{len(todo)}", flush=True)
    finally:
        primary.close()
        if primary.calibration is not None:
            primary.calibration.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="judge vicuna_eval items and write one JSON line per item")
    r.add_argument("--judge-model", required=True, help="primary judge: model folder, hub id or preset")
    r.add_argument("--base-model", help="base model for SE-Cali (teacher forcing on a second vLLM engine)")
    r.add_argument("--base-wire", default="chat", help="the base model's own wire format (chat, inst, raw)")
    r.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/vicuna_eval.json"))
    r.add_argument("--out", required=True)
    r.add_argument("--offset", type=int, default=0)
    r.add_argument("--limit", type=int, default=16)
    r.add_argument("--batch-size", type=int, default=8)
    r.add_argument("--max-tokens", type=int, default=96)
    r.add_argument("--max-retries", type=int, default=0)
    r.add_argument("--temperature", type=float, default=1.0)
    e = sub.add_parser("evaluate", help="halves and cascade tables from a judgments file")
    e.add_argument("judgments")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        lines = Path(args.judgments).read_text(encoding="utf-8").splitlines()
        print(report([json.loads(line) for line in lines if line.strip()]))


if __name__ == "__main__":
    main()
