"""Evaluate a (pocket) judge with the project's own ``PrometheusJudge`` on the vLLM engine.

- Absolute: grade the pocket dev split of ``vicuna_eval.json`` (prompts never trained on); Pearson,
  Spearman and Kendall correlation of the judge's score with the mean GPT-4 score, over the items the
  judge graded; the parse-failure rate is over all samples (no retries, no forced verdicts: the raw
  format adherence).
- Pairwise: a seeded subset of ``autoj_pairwise.jsonl`` (human labels) judged in both orders
  (``swap=True``): agreeing orders give the winner, disagreeing ones a tie (one order without a
  verdict: the other decides; none: no prediction, counted wrong). Accuracy without ties (items
  labelled 0/1) and with ties (all items; a tie label is right only when the judge ties).
  The rubric is the built-in helpfulness criteria (the file carries none).
- Backends: the vLLM engine (default) or ``--backend transformers`` (bf16 ``model.generate`` on a GPU
  that has no vLLM, as on the lent training machine).
- Sampling: the paper parameters from ``prom_reward``'s defaults (temperature 1.0, top_p 0.9,
  repetition penalty 1.03); ``--max-tokens`` caps generation (1024 in the paper; smaller on CPU).

A LoRA adapter is merged into its base first (``merge_adapter``: a plain HF folder, bf16) since the
vLLM CPU engine serves merged weights.

Shell::

    python -m train_judge.evaluate --model local:smollm2 --name base --out /work/pocket/eval_base.json
    python -m train_judge.evaluate --model local:smollm2 --adapter /work/pocket/absolute --name absolute \\
        --out /work/pocket/eval_absolute.json
    python -m train_judge.evaluate --table /work/pocket/eval_*.json     # the markdown table

Example (the metrics alone):
    >>> m = correlations([1, 2, 3, 4], [1.0, 2.5, 2.0, 4.0])
    >>> round(m["pearson"], 3), round(m["spearman"], 3), round(m["kendall"], 3)
    (0.878, 0.8, 0.667)
    >>> pairwise_accuracy(["A", "B", "tie", "A", None], [0, 1, 2, 1, 2])
    {'acc_wo_tie': 0.6667, 'acc_w_tie': 0.6, 'n_wo_tie': 3, 'n_w_tie': 5}
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prom_reward.cli.voice import PlainHelpFormatter
from prom_reward.errors import ConfigError, PromRewardError

MERGED_MARKER = ".merged_from.json"


def correlations(predicted: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    """Pearson, Spearman and Kendall (tau-b) correlations (NaN when a side is constant)."""
    from scipy import stats

    if len(predicted) != len(reference) or len(predicted) < 2:
        raise ConfigError(f"need two equally long lists of >= 2 scores, got {len(predicted)} and {len(reference)}")
    if len(set(predicted)) < 2 or len(set(reference)) < 2:
        nan = float("nan")
        return {"pearson": nan, "spearman": nan, "kendall": nan}
    return {
        "pearson": float(stats.pearsonr(predicted, reference)[0]),
        "spearman": float(stats.spearmanr(predicted, reference)[0]),
        "kendall": float(stats.kendalltau(predicted, reference)[0]),
    }


def pairwise_accuracy(predictions: Sequence[str | None], labels: Sequence[int]) -> dict[str, float]:
    """Accuracy without ties (items labelled 0 = first better, 1 = second better) and with ties (all
    items; label 2 is right only for a ``"tie"`` prediction). A None prediction (no verdict) is wrong."""
    want = {0: "A", 1: "B", 2: "tie"}
    wo = [(w, want[lab]) for w, lab in zip(predictions, labels, strict=True) if lab in (0, 1)]
    allp = [(w, want[lab]) for w, lab in zip(predictions, labels, strict=True)]
    acc = lambda xs: round(sum(a == b for a, b in xs) / len(xs), 4) if xs else float("nan")  # noqa: E731
    return {"acc_wo_tie": acc(wo), "acc_w_tie": acc(allp), "n_wo_tie": len(wo), "n_w_tie": len(allp)}


def merge_adapter(base: str, adapter: str | Path, out_dir: str | Path) -> Path:
    """Merge a LoRA adapter into its base and save a bf16 HF folder (skipped when already done)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from prom_reward.core.presets import resolve_model_path

    out, adapter = Path(out_dir), Path(adapter)
    if not (adapter / "adapter_model.safetensors").is_file():
        raise ConfigError(
            f"--adapter {adapter}: expected a PEFT LoRA folder with adapter_model.safetensors (what "
            "train_judge.sft writes); give that folder, or leave --adapter out for a full model"
        )
    stamp = {
        "base": base,
        "adapter": str(adapter.resolve()),
        "adapter_mtime": (adapter / "adapter_model.safetensors").stat().st_mtime,
    }
    try:
        if json.loads((out / MERGED_MARKER).read_text(encoding="utf-8")) == stamp:
            return out
    except (OSError, ValueError):  # none yet, or cut by a kill: merged again
        pass
    base_path = resolve_model_path(base)
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base_path).save_pretrained(out)
    (out / MERGED_MARKER).write_text(json.dumps(stamp), encoding="utf-8")
    return out


def autoj_subset(path: str | Path, n: int, *, seed: int = 0, max_chars: int = 4000) -> list[dict[str, Any]]:
    """``n`` seeded-random autoj pairs whose prompt + responses fit ``max_chars`` (CPU context budget)."""
    from .layouts import read_local_rows

    fields = {"prompt": str, "response 1": str, "response 2": str, "label": int}
    rows = read_local_rows(Path(path), "pass the autoj pairs file as --autoj PATH, or --pairs 0", fields)
    fit = [r for r in rows if len(r["prompt"]) + len(r["response 1"]) + len(r["response 2"]) <= max_chars]
    random.Random(seed).shuffle(fit)
    return fit[:n]


def judge_backend_options(
    backend: str, *, max_model_len: int = 4096, device: str = "cuda", batch_size: int = 256
) -> dict[str, Any]:
    """Backend options for the evaluation judge: the vLLM engine (eager, bounded context) or plain
    ``transformers`` generation in bf16 on ``device`` (for a GPU without vLLM).

    >>> judge_backend_options("transformers", device="cpu", batch_size=4)["batch_size"]
    4
    """
    if backend == "vllm":
        return {"max_model_len": max_model_len, "enforce_eager": True}
    if backend == "transformers":
        return {
            "max_model_len": max_model_len,
            "device": device,
            "batch_size": batch_size,
            "dtype": "bfloat16" if device != "cpu" else "float32",
        }
    raise ConfigError(f"backend: expected 'vllm' or 'transformers', got {backend!r}")


def evaluate(
    model_dir: str,
    *,
    vicuna: str | Path,
    autoj: str | Path,
    dev_limit: int | None,
    pairs: int,
    max_tokens: int,
    dev_fraction: float = 0.25,
    split_seed: int = 0,
    max_model_len: int = 4096,
    temperature: float | None = None,
    backend: str = "vllm",
    device: str = "cuda",
    batch_size: int = 256,
    num_samples: int = 1,
) -> dict[str, Any]:
    """Grade the dev split (``num_samples`` per response, the grade is their mean) and the autoj
    subset with one judge; returns the metrics."""
    from prom_reward import PrometheusJudge

    from .pocket import PocketData

    dev = PocketData(vicuna, dev_fraction=dev_fraction, seed=split_seed).dev_items()[:dev_limit]
    pair_rows = autoj_subset(autoj, pairs) if pairs else []
    sampling: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        sampling["temperature"] = temperature
    result: dict[str, Any] = {
        "model": model_dir,
        "sampling": sampling,
        "n_dev": len(dev),
        "n_pairs": len(pair_rows),
        "backend": backend,
        "num_samples": num_samples,
    }
    options = judge_backend_options(backend, max_model_len=max_model_len, device=device, batch_size=batch_size)
    judge = PrometheusJudge(
        model=model_dir,
        backend=backend,
        wire="chat",
        sampling=sampling,
        num_samples=num_samples,
        max_retries=0,
        force_verdict="never",
        truncate_response=True,
        **options,
    )
    try:
        t0 = time.perf_counter()
        grades = judge.grade(
            [d.instruction for d in dev],
            [d.response for d in dev],
            [d.rubric for d in dev],
            [d.reference_answer for d in dev],
        )
        s = judge.stats
        ok = [(g.score, d.mean_score) for g, d in zip(grades, dev, strict=True) if g.score is not None]
        sample_scores = [x for g in grades for x in g.scores if x is not None]
        result["absolute"] = {
            **(correlations([a for a, _ in ok], [b for _, b in ok]) if len(ok) >= 2 else {}),
            "graded": len(ok),
            "parse_failure_rate": round(s.parse_failures / max(s.samples, 1), 4),
            "score_counts": {k: sample_scores.count(k) for k in (1, 2, 3, 4, 5)},
            "scores": [g.score for g in grades],
            "stopped_at_max_tokens": sum(x.finish_reason == "length" for g in grades for x in g.samples),
            "seconds": round(time.perf_counter() - t0, 1),
            "completion_tokens": s.completion_tokens,
            "example_feedback": next((g.feedback for g in grades if g.feedback), None),
        }
        if pair_rows:
            before = (s.samples, s.parse_failures)
            t1 = time.perf_counter()
            verdicts = judge.compare(
                [r["prompt"] for r in pair_rows],
                [r["response 1"] for r in pair_rows],
                [r["response 2"] for r in pair_rows],
                "helpfulness",
                swap=True,
            )
            samples, failures = s.samples - before[0], s.parse_failures - before[1]
            preds = ["tie" if v.tie else v.winner for v in verdicts]
            result["pairwise"] = {
                **pairwise_accuracy(preds, [int(r["label"]) for r in pair_rows]),
                "verdicts_parsed": sum(p is not None for p in preds),
                "predictions": preds,
                "stopped_at_max_tokens": sum(x.finish_reason == "length" for v in verdicts for x in v.samples),
                "parse_failure_rate": round(failures / max(samples, 1), 4),
                "ties_predicted": sum(v.tie for v in verdicts),
                "seconds": round(time.perf_counter() - t1, 1),
                "example_feedback": next((v.feedback for v in verdicts if v.feedback), None),
            }
    finally:
        judge.close()
    return result


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) and x == x else ("n/a" if isinstance(x, float) else str(x))


def results_table(results: Sequence[dict[str, Any]]) -> str:
    """A markdown table of several ``evaluate`` results.

    >>> print(results_table([{"name": "j", "n_dev": 2, "n_pairs": 0, "absolute": {"pearson": 0.5, "spearman": 0.5,
    ...     "kendall": 0.5, "graded": 2, "parse_failure_rate": 0.0}}]).splitlines()[2])
    | j | 0.500 | 0.500 | 0.500 | 2/2 | 0.000 | - | - | - |
    """
    head = (
        "| judge | Pearson | Spearman | Kendall | graded | abs. parse failures | pairwise acc. w/o tie "
        "| pairwise acc. w/ tie | pair parse failures |"
    )
    lines = [head, "|" + "---|" * 9]
    for r in results:
        a, p = r.get("absolute", {}), r.get("pairwise")
        pair = [p.get("acc_wo_tie"), p.get("acc_w_tie"), p.get("parse_failure_rate")] if p else [None] * 3
        cells = [str(r.get("name")), *(_fmt(a.get(k)) for k in ("pearson", "spearman", "kendall"))]
        cells += [f"{a.get('graded', 0)}/{r.get('n_dev')}", _fmt(a.get("parse_failure_rate")), *map(_fmt, pair)]
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def count(least: int) -> Callable[[str], int]:
    """An argparse ``type``: an int >= ``least``, else argparse stops (naming the flag, exit status 2) before any
    work starts."""

    def parse(text: str) -> int:
        if not text.strip().lstrip("+-").isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"expected an int >= {least}, got {text}")
        return int(text)

    return parse


EVALUATION_FLAGS = tuple("vicuna autoj dev_limit pairs max_tokens num_samples backend device batch_size".split())
"""The ``evaluate`` keywords ``add_evaluation_flags`` gives a command line (this one and the pocket pipeline's)."""


def add_evaluation_flags(ap: argparse.ArgumentParser) -> None:
    """The flags of ``EVALUATION_FLAGS`` (the data, the counts, the backend), with this command's defaults."""
    from .sft import default_vicuna_path

    ap.add_argument("--vicuna", default=str(default_vicuna_path()))
    ap.add_argument("--autoj", default=str(default_vicuna_path().parent / "autoj_pairwise.jsonl"))
    ap.add_argument("--dev-limit", type=count(1), default=None, help="grade only the first N dev items")
    ap.add_argument("--pairs", type=count(0), default=40, help="autoj pairs judged in both orders (0: skip)")
    ap.add_argument("--max-tokens", type=count(1), default=256, help="generation cap (paper: 1024)")
    ap.add_argument(
        "--num-samples", type=count(1), default=1, help="samples per dev response (the grade is their mean)"
    )
    ap.add_argument(
        "--backend",
        choices=("vllm", "transformers"),
        default="vllm",
        help="vllm (the engine) or transformers (plain generate, e.g. a GPU without vLLM)",
    )
    ap.add_argument("--device", default="cuda", help="transformers backend: torch device")
    ap.add_argument("--batch-size", type=count(1), default=256, help="transformers backend: requests per generate call")


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--table"]:
        print(results_table([json.loads(Path(f).read_text(encoding="utf-8")) for f in argv[1:]]))
        return

    ap = argparse.ArgumentParser(
        prog="python -m train_judge.evaluate",
        description=__doc__.split("\n\n")[0],
        formatter_class=PlainHelpFormatter,
    )
    ap.add_argument("--model", required=True, help="base model (local:smollm2, folder, hub id) or merged folder")
    ap.add_argument("--adapter", default=None, help="LoRA adapter folder to merge into --model first")
    ap.add_argument("--merged-dir", default=None, help="where the merged model goes (default: ADAPTER-merged)")
    ap.add_argument("--name", default=None, help="row name in the results")
    ap.add_argument("--out", required=True, help="results JSON file")
    ap.add_argument("--temperature", type=float, default=None, help="override the paper's 1.0 (0: greedy)")
    add_evaluation_flags(ap)
    args = ap.parse_args(argv)
    if not Path(args.out).resolve().parent.is_dir():  # said now, not after hours of generation
        ap.error(f"--out: the folder of {args.out} does not exist; create it or choose another path")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    try:
        from prom_reward.core.presets import resolve_model_path

        model = args.model
        if args.adapter:
            merged_dir = args.merged_dir or f"{args.adapter.rstrip('/')}-merged"
            model = str(merge_adapter(args.model, args.adapter, merged_dir))
        else:
            model = resolve_model_path(model)
        res = evaluate(model, temperature=args.temperature, **{k: getattr(args, k) for k in EVALUATION_FLAGS})
    except PromRewardError as e:  # bad config or data: one message, exit status 2 (as train_judge.sft and .merge)
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    res["name"] = args.name or Path(model).name
    Path(args.out).write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
