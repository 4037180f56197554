"""``prom-reward grade``, ``compare`` and ``pairs``: one job engine (``prom_reward.jobs.run``), in this process or on
Ray (``--ray``); the summary goes to stderr and as one JSON line to stdout (docs/jobs.md). And ``prom-reward store
info|export STORE [-o OUT]``: look into or export a judgment store."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from itertools import islice
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.cli.voice import (
    add_judge_options,
    add_outage_options,
    add_store_options,
    fds_to,
    judge_spec,
    outage_policy,
)
from prom_reward.declared import add_settings, given_settings
from prom_reward.errors import ConfigError
from prom_reward.format.columns import DEFAULTS, column_flag
from prom_reward.jobs.kinds import CompareJob, GradeJob
from prom_reward.jobs.pairs import PairsJob
from prom_reward.jobs.parts import write_rows
from prom_reward.jobs.spec import JOB_OUTAGE, JobConfig, JobKind, RayConfig
from prom_reward.jobs.summary import EXIT_CODES, EXIT_JUDGE_DOWN
from prom_reward.preferences.config import PreferenceConfig

KINDS: dict[str, type[JobKind]] = {"grade": GradeJob, "compare": CompareJob, "pairs": PairsJob}
"""Each job's kind: its column options (``JobKind.column_options``) are its ``--<role>-col`` flags."""


RAY = ("address", "replicas", "num_gpus", "num_cpus")
"""The ``RayConfig`` settings of a job on Ray (``num_gpus``, ``num_cpus``: ``--gpus/cpus-per-replica``)."""
PAIRS = ("strategy", "min_margin", "max_tie_rounds", "layout")
CHECKLIST = ("checklist_mode", "checklist_aggregation")
"""The ``PreferenceConfig`` settings ``pairs`` has a flag for (``grade``: the checklist ones)."""


def _kind(args: argparse.Namespace) -> JobKind:
    columns = {option: getattr(args, option) for option in KINDS[args.command].column_options()}
    if args.command == "compare":
        return CompareJob(rubric=args.rubric, swap=not args.no_swap, **columns)
    if args.command == "grade":
        return GradeJob(rubric=args.rubric, **given_settings(args, PreferenceConfig, CHECKLIST), **columns)
    given = given_settings(args, PreferenceConfig, PAIRS + CHECKLIST)
    keep = tuple(args.keep_columns or ())
    return PairsJob(PreferenceConfig(rubric=args.rubric, swap=not args.no_swap, keep_columns=keep, **given, **columns))


def cmd_job(args: argparse.Namespace) -> int:
    """Run ``grade``, ``compare`` or ``pairs`` (locally, or on Ray with ``--ray``)."""
    from prom_reward.jobs.run import run_job

    kind = _kind(args)
    outage = outage_policy(args, JOB_OUTAGE)
    given = given_settings(args, JobConfig, ("batch_size", "resume", "overwrite"))
    config = JobConfig(progress=not args.quiet, outage=outage, **given)
    ray = RayConfig(**given_settings(args, RayConfig, RAY)) if args.ray else None
    if ray is not None and args.store:
        raise ConfigError(
            "--store with --ray: every replica would write one SQLite file; fix: drop --store "
            "(--resume skips the batches already committed)"
        )
    spec = run_sync(judge_spec(args).aresolve)  # the served model, asked once: canary, requests and store read it
    with fds_to(2, 1):  # vLLM, torch and Ray print to stdout: only the summary may go there (one JSON line)
        summary = run_job(kind, args.input, args.output, spec.kwargs(), config, ray)
    code = summary.exit_code()
    if code == EXIT_JUDGE_DOWN:  # the first line says which judge and why: the rest is the summary
        where = " ".join(spec.server) or spec.model
        print(
            f"prom-reward: error: {args.command}: the judge {where} could not be reached or refused every request: "
            f"{summary.backend_error}; fix: start the judge (or correct --server), then run again with --resume",
            file=sys.stderr,
        )
    print(summary.text(), file=sys.stderr)
    print(json.dumps(dataclasses.asdict(summary)), flush=True)
    return code


ROWS = ".jsonl, .json, .parquet or a datasets save_to_disk folder"
OUT = ".jsonl or .parquet (parts in OUTPUT.parts/), or a folder name: the part files alone"


def _add_job_parser(
    sub: Any, name: str, summary: str, input_help: str = ROWS, output_help: str = OUT, batch_size: int = 256
) -> argparse.ArgumentParser:
    """The options every job shares: IN -o OUT, rubric, judge, batches, resume/overwrite, columns, Ray."""
    g = sub.add_parser(name, help=summary, description=summary, epilog=EXIT_CODES)
    g.add_argument("input", nargs="+", help=input_help + " (several files, or a folder: rows in the order given)")
    g.add_argument("-o", "--output", required=True, help=output_help)
    g.add_argument(
        "--rubric",
        help="built-in name (helpfulness, ...), or a JSON/YAML rubric file; default: each row's rubric column",
    )
    add_judge_options(g)
    add_store_options(g)
    add_settings(g, JobConfig, ("batch_size",), defaults=JobConfig(batch_size=batch_size))
    g.set_defaults(batch_size=batch_size)
    add_settings(g.add_mutually_exclusive_group(), JobConfig, ("resume", "overwrite"))
    for option in KINDS[name].column_options():
        ours, *trl = DEFAULTS[option]  # TRL's name of the role, where it has another
        g.add_argument(
            column_flag(option),
            dest=option,
            default=None if trl else ours,
            metavar="COLUMN",
            help=f"input column with the {ours.replace('_', ' ')} (default {ours}"
            + (f", else TRL's {trl[0]}; a row with both is refused" if trl else "")
            + "); a column named here must be in every row",
        )
    g.add_argument("--quiet", action="store_true", help="no progress bars")
    add_outage_options(g, JOB_OUTAGE, "marks the rows for --resume")
    r = g.add_argument_group("Ray (offline scoring on a pool of judge replicas; docs/serving.md)")
    r.add_argument(
        "--ray",
        action="store_true",
        help="run as a Ray Data pipeline: local Ray, or the cluster of --address / RAY_ADDRESS",
    )
    add_settings(r, RayConfig, RAY, flags={"num_gpus": "--gpus-per-replica", "num_cpus": "--cpus-per-replica"})
    g.set_defaults(func=cmd_job)
    return g


def add_job_parsers(sub: Any) -> None:
    """The ``grade``, ``compare`` and ``pairs`` subcommands."""
    g = _add_job_parser(
        sub, "grade", "absolute grades (1..5) for rows of instruction and response (or TRL's prompt and completion)"
    )
    add_settings(g, PreferenceConfig, CHECKLIST)
    c = _add_job_parser(
        sub,
        "compare",
        "pairwise verdicts (A or B, both orders) for rows of instruction, response_a, response_b (or TRL's prompt, "
        "chosen, rejected)",
    )
    c.add_argument(
        "--no-swap",
        action="store_true",
        help="judge one order only (default: both orders, a winner only where they agree)",
    )
    d = _add_job_parser(
        sub,
        "pairs",
        "DPO preference pairs from several completions per prompt",
        ROWS + ": prompt + completions per row",
        ".jsonl (skip records in OUTPUT.skipped.jsonl)",
        64,
    )
    add_settings(d, PreferenceConfig, PAIRS + CHECKLIST)
    d.add_argument("--no-swap", action="store_true", help="all_pairs: judge one order only")
    d.add_argument(
        "--keep-col", dest="keep_columns", action="append", help="input column copied into each pair (repeatable)"
    )


def cmd_store(args: argparse.Namespace) -> int:
    from prom_reward.backends.store import JudgmentStore

    if not os.path.isfile(args.path):
        raise ConfigError(f"{args.path}: no judgment store there; fix: give the SQLite file given to --store")
    if args.action == "export" and not args.output:
        raise ConfigError("store export: no output; fix: give -o OUT.jsonl or -o OUT.parquet")
    with JudgmentStore(args.path, timeout=args.timeout, create=False) as store:
        if args.action == "export":
            rows = store.entries()
            n = write_rows(args.output, iter(lambda: list(islice(rows, 1000)), []))  # batches of 1,000
            print(f"exported {n} judgments -> {args.output}", file=sys.stderr)
            return 0
        models, integrity = store.models(), store.integrity_check()
        print(json.dumps(dict(path=str(store.path), judgments=len(store), models=models, integrity=integrity)))
    return 0


def add_store_parser(sub: Any) -> None:
    s = sub.add_parser("store", help="look into (info) or export (export -o OUT) a judgment store")
    s.add_argument("action", choices=["info", "export"], help="info: what the store holds; export: write it to -o")
    s.add_argument("path", help="the SQLite judgment store (as given to --store)")
    s.add_argument("-o", "--output", help="export: .jsonl or .parquet")
    s.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to wait for a store another process holds locked (default 30)",
    )
    s.set_defaults(func=cmd_store)
