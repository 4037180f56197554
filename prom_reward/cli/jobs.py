"""``prom-reward grade``, ``compare`` and ``pairs``: judge a file of rows, locally or on Ray (``--ray``).

Example:
    $ prom-reward grade rollouts.jsonl -o graded.jsonl --rubric helpfulness --model smollm2-135m-instruct
    $ prom-reward compare ab.jsonl -o verdicts.jsonl --rubric helpfulness --server URL
    $ prom-reward pairs samples.jsonl -o pairs.jsonl --strategy all_pairs --rubric helpfulness --server URL
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import islice
from typing import Any, Iterator

from prom_reward.cli.judge_options import add_judge_options, build_judge, judge_kwargs
from prom_reward.jobs.grade import grade_rows
from prom_reward.jobs.io import RowWriter, count_rows, read_rows


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while True:
        chunk = list(islice(rows, size))
        if not chunk:
            return
        yield chunk


def _judge_file(args: argparse.Namespace, desc: str, judge_chunk: Any,
                counts: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
    """Stream ``args.input`` through ``judge_chunk(judge, rows, start)`` in batches to ``args.output``;
    ``--resume`` skips the rows already there. Returns (rows judged, rows resumed, ``counts`` totals)."""
    from tqdm import tqdm

    done = count_rows(args.output) if args.resume else 0
    rows = read_rows(args.input)
    if done:
        rows = islice(rows, done, None)
    judge = build_judge(args)
    totals = dict.fromkeys(counts, 0)
    start = time.perf_counter()
    n = 0
    try:
        with RowWriter(args.output, append=bool(done)) as writer, \
                tqdm(desc=desc, unit="item", initial=done, disable=args.quiet) as bar:
            for chunk in _chunks(rows, args.batch_size):
                judged = judge_chunk(judge, chunk, done + n)
                writer.write(judged)
                n += len(judged)
                for k, pred in counts.items():
                    totals[k] += sum(1 for r in judged if pred(r))
                bar.update(len(judged))
                bar.set_postfix(**totals, items_s=f"{n / max(time.perf_counter() - start, 1e-9):.2f}")
    finally:
        judge.close()
    return n, done, totals


def cmd_grade(args: argparse.Namespace) -> int:
    if args.ray:
        return _ray_job("grade", args)
    n, done, t = _judge_file(args, "grading", lambda judge, rows, start: grade_rows(judge, rows, args, start),
                             {"failures": lambda g: g["score"] is None})
    print(f"graded {n} rows ({done} resumed) -> {args.output}; {t['failures']} without a verdict", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Pairwise verdicts per row (``prom_reward.jobs.compare``)."""
    from prom_reward.jobs.compare import compare_rows, is_failure

    args.swap = not args.no_swap
    if args.ray:
        return _ray_job("compare", args)
    n, done, t = _judge_file(args, "comparing", lambda judge, rows, start: compare_rows(judge, rows, args, start),
                             {"failures": is_failure, "ties": lambda r: r["tie"]})
    print(f"compared {n} rows ({done} resumed) -> {args.output}; {t['ties']} ties, {t['failures']} without a "
          "verdict", file=sys.stderr)
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from prom_reward.preferences.config import PreferenceConfig
    from prom_reward.preferences.build import build_preference_dataset

    cfg = PreferenceConfig(
        strategy=args.strategy, min_margin=args.min_margin, rubric=args.rubric, swap=not args.no_swap,
        max_tie_rounds=args.max_tie_rounds, chunk_size=args.chunk_size, layout=args.layout,
        prompt_column=args.prompt_col, completions_column=args.completions_col,
        completion_column=args.completion_col, reference_column=args.reference_col, rubric_column=args.rubric_col,
        keep_columns=tuple(args.keep_col or ()),
    )
    if args.ray:
        return _ray_job("pairs", args, cfg)
    total = count_rows(args.input) if args.layout == "wide" else None
    judge = build_judge(args)
    try:
        with tqdm(desc="pairs", unit="row", total=total, disable=args.quiet) as bar:
            def progress(stats: Any) -> None:
                bar.n = stats.rows
                bar.set_postfix(pairs=stats.pairs, skipped=sum(stats.skipped.values()), refresh=False)
                bar.refresh()

            _, stats = build_preference_dataset(judge, args.input, cfg, output=args.output, resume=args.resume,
                                                progress=progress)
    finally:
        judge.close()
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(stats.skipped.items())) or "none"
    print(f"{stats.pairs} pairs from {stats.rows} rows ({stats.resumed_rows} resumed) -> {args.output}; "
          f"skipped: {skipped}", file=sys.stderr)
    print(json.dumps(stats.to_dict()))
    return 0


def _ray_job(task: str, args: argparse.Namespace, pairs: Any = None) -> int:
    """``--ray``: the same job as a Ray Data pipeline over a pool of judge replicas
    (``prom_reward.jobs.ray_run``)."""
    from prom_reward.errors import ConfigError
    from prom_reward.jobs.ray_config import RayJobConfig
    from prom_reward.jobs.ray_run import compare_dataset, grade_dataset, pairs_dataset

    if getattr(args, "store", None):
        raise ConfigError("--store with --ray: every replica would write one SQLite file; drop --store "
                          "(--resume skips the shards already written)")
    if args.replicas != "all" and not args.replicas.isdigit():
        raise ConfigError(f"--replicas: expected a number or 'all', got {args.replicas!r}")
    cfg = RayJobConfig(judge=judge_kwargs(args), replicas=args.replicas if args.replicas == "all" else
                       int(args.replicas), num_gpus=args.gpus_per_replica, num_cpus=args.cpus_per_replica,
                       resume=args.resume, address=args.address, progress=not args.quiet,
                       rows_per_shard=args.chunk_size if task == "pairs" else args.batch_size)
    if task == "pairs":
        summary = pairs_dataset(args.input, args.output, judge=cfg.judge, pairs=pairs, config=cfg)
    elif task == "compare":
        from prom_reward.jobs.compare import COMPARE_COLUMNS

        summary = compare_dataset(args.input, args.output, judge=cfg.judge, rubric=args.rubric, swap=args.swap,
                                  config=cfg, **{k: getattr(args, k) for k in COMPARE_COLUMNS})
    else:
        summary = grade_dataset(args.input, args.output, judge=cfg.judge, rubric=args.rubric, config=cfg,
                                instruction_col=args.instruction_col, response_col=args.response_col,
                                reference_col=args.reference_col, rubric_col=args.rubric_col)
    print(summary.text(), file=sys.stderr)
    print(json.dumps(summary.to_dict()))
    return 0


def _add_ray_options(g: argparse.ArgumentParser) -> None:
    """``--ray`` and the options of a Ray job (grade, compare and pairs)."""
    r = g.add_argument_group("Ray (offline scoring on a pool of judge replicas; docs/serving.md)")
    r.add_argument("--ray", action="store_true", help="run as a Ray Data pipeline: local Ray, or the cluster "
                   "of --address / RAY_ADDRESS; OUTPUT.parts/ holds one part file per shard")
    r.add_argument("--address", help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray)")
    r.add_argument("--replicas", default="1", help="judge replicas: a number or 'all' (every GPU of the cluster "
                   "/ --gpus-per-replica); default 1")
    r.add_argument("--gpus-per-replica", type=float, help="default: --tensor-parallel-size on a GPU cluster, else 0")
    r.add_argument("--cpus-per-replica", type=float, default=1.0)


def _add_rows_parser(sub: Any, name: str, summary: str, func: Any, *columns: str) -> argparse.ArgumentParser:
    """A row-by-row judging command (grade, compare): IN -o OUT, judge, batch, resume, ``--X-col`` options, Ray."""
    g = sub.add_parser(name, help=summary)
    g.add_argument("input", help=".jsonl, .json or .parquet")
    g.add_argument("-o", "--output", required=True, help=".jsonl (resumable) or .parquet")
    g.add_argument("--rubric", help="built-in name (helpfulness, ...), or a JSON/YAML rubric file; "
                                    "default: each row's rubric column")
    add_judge_options(g)
    g.add_argument("--batch-size", type=int, default=256, help="rows per judge call (and per write)")
    g.add_argument("--resume", action="store_true", help="skip rows already written to OUTPUT (.jsonl); with "
                   "--ray: skip finished shards, judge again the shards whose backend failed")
    for col in columns:  # --instruction-col, --response-a-col, --reference-col (reference_answer) ...
        flag = col.replace("_answer", "").replace("_", "-")
        g.add_argument(f"--{flag}-col", dest=f"{flag.replace('-', '_')}_col", default=col)
    g.add_argument("--quiet", action="store_true")
    _add_ray_options(g)
    g.set_defaults(func=func)
    return g


def add_job_parsers(sub: Any) -> None:
    """The ``grade``, ``compare`` and ``pairs`` subcommands."""
    g = _add_rows_parser(sub, "grade", "absolute grades for a file of (instruction, response) rows", cmd_grade,
                         "instruction", "response", "reference_answer", "rubric")
    g.add_argument("--store", help="SQLite judgment store: saves each batch's judge results; "
                   "a re-run (or --resume after a crash) recomputes nothing stored")
    c = _add_rows_parser(sub, "compare", "pairwise verdicts (A or B, both orders) for rows of instruction, "
                         "response_a, response_b", cmd_compare,
                         "instruction", "response_a", "response_b", "reference_answer", "rubric")
    c.add_argument("--no-swap", action="store_true", help="judge one order only (default: both orders, "
                   "a winner only where they agree)")

    d = sub.add_parser("pairs", help="DPO preference pairs from several completions per prompt")
    d.add_argument("input", help=".jsonl, .json or .parquet: prompt + completions per row")
    d.add_argument("-o", "--output", required=True, help=".jsonl (resumable); sidecars .skipped.jsonl, .progress.json")
    d.add_argument("--strategy", default="best_vs_worst", choices=["best_vs_worst", "all_pairs"])
    d.add_argument("--min-margin", type=float, default=0.0,
                   help="drop pairs below this margin (score points; P(win) units for all_pairs)")
    d.add_argument("--rubric", help="built-in name (helpfulness, ...), or a JSON/YAML rubric file; "
                                    "default: each row's rubric column")
    add_judge_options(d)
    d.add_argument("--max-tie-rounds", type=int, help="best_vs_worst: re-grading rounds for all-equal rows")
    d.add_argument("--no-swap", action="store_true", help="all_pairs: judge one order only")
    d.add_argument("--chunk-size", type=int, default=64, help="rows per judge call (and per write)")
    d.add_argument("--resume", action="store_true", help="continue an interrupted run on OUTPUT")
    d.add_argument("--layout", default="wide", choices=["wide", "long"],
                   help="long: one row per completion, consecutive rows with the same prompt grouped")
    d.add_argument("--prompt-col", default="prompt")
    d.add_argument("--completions-col", default="completions")
    d.add_argument("--completion-col", default="completion", help="the completion column of the long layout")
    d.add_argument("--reference-col", default="reference_answer")
    d.add_argument("--rubric-col", default="rubric")
    d.add_argument("--keep-col", action="append", help="input column copied into each pair (repeatable)")
    d.add_argument("--quiet", action="store_true")
    _add_ray_options(d)
    d.set_defaults(func=cmd_pairs)
