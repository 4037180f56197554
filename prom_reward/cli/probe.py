"""``prom-reward probe``: how exploitable is a judge? LLMBar accuracy (Natural vs Adversarial, both orders) and
score shifts under response edits (padding, formal preamble, self-grades, question restated, markdown), written
as JSON with a one-screen summary on stdout (``prom_reward.probe``).

Example:
    $ prom-reward probe --model pocket-judge --limit 20 --max-tokens 256 -o probe.json
    $ prom-reward probe --server http://127.0.0.1:8000/v1 --llmbar LLMBar/Dataset/LLMBar --items graded.jsonl -o p.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.cli.judge_options import (
    add_judge_options,
    add_outage_options,
    add_store_options,
    judge_spec,
    outage_policy,
)
from prom_reward.errors import ConfigError
from prom_reward.probe.edits import DEFAULT_EDITS
from prom_reward.probe.run import PARTS, ProbeConfig, load_inputs, run_probe
from prom_reward.probe.summary import summary
from prom_reward.rewards.outage import Outage, OutagePolicy

PROBE_OUTAGE = OutagePolicy(on_exhausted="raise")
"""The probe's outage policy unless given: a judge that fails is waited out for ``budget_s`` (150 s) from its first
failure, then the probe stops (exit 4, nothing written): a record measured on missing judgments would mislead."""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def add_probe_parser(sub: Any) -> None:
    """Register ``prom-reward probe``."""
    p = sub.add_parser(
        "probe",
        help="measure how exploitable a judge is (LLMBar adversarial accuracy, score shifts under response edits)",
        epilog="exit status: 0 the record was written; 2 bad input, options or a misconfigured judge (nothing "
        "written); 4 the judge could not be reached or refused every request (the error names the URL first)",
    )
    p.add_argument("-o", "--output", required=True, help="the probe record (.json)")
    p.add_argument(
        "--llmbar",
        help="LLMBar folder (Natural.json, Adversarial_*.json); default: benchmarks/data/"
        "llmbar of a prom-reward checkout",
    )
    p.add_argument(
        "--items",
        help=".jsonl/.json/.parquet rows with instruction, response [, reference_answer, "
        "rubric, id]; default: benchmarks/data/vicuna_eval.json of a checkout",
    )
    p.add_argument("--limit", type=int, help="pairs per LLMBar set and graded items at most (a seeded subset)")
    p.add_argument(
        "--parts",
        type=_csv,
        help=f"comma-separated, some of {','.join(PARTS)} (default: every part the judge format judges: llmbar "
        "compares pairs, shifts grades on the format's scale)",
    )
    p.add_argument(
        "--edits", type=_csv, default=DEFAULT_EDITS, help=f"comma-separated (default all: {','.join(DEFAULT_EDITS)})"
    )
    p.add_argument("--rubric", default="helpfulness", help="rubric of the LLMBar pairs and of items without one")
    p.add_argument(
        "--baseline-samples",
        type=int,
        default=3,
        help="grades of each unedited response (their mean is what the edits are compared with)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals and the edits (default 0)")
    add_judge_options(p)
    add_store_options(p)
    add_outage_options(p, PROBE_OUTAGE, "records the unanswered judgments as failures")
    p.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise ConfigError(f"-o {args.output}: the probe writes one JSON record; fix: name a .json file")
    if not out.parent.is_dir():
        raise ConfigError(f"-o {args.output}: folder {out.parent} does not exist; fix: create it or choose another -o")
    if out.is_dir():
        raise ConfigError(f"-o {args.output}: that is a folder; fix: name a .json file")
    if args.items and out.resolve() == Path(args.items).resolve():
        raise ConfigError(f"-o {args.output}: that is the --items file; fix: write the record to another file")
    if args.llmbar and out.resolve().parent == Path(args.llmbar).resolve():
        raise ConfigError(f"-o {args.output}: that is in the --llmbar folder; fix: write the record elsewhere")
    cfg = ProbeConfig(
        parts=args.parts,
        llmbar=args.llmbar,
        items=args.items,
        limit=args.limit,
        edits=args.edits,
        rubric=args.rubric,
        expected=args.expected,
        baseline_samples=args.baseline_samples,
        seed=args.seed,
    )
    outage = outage_policy(args, PROBE_OUTAGE)
    given = judge_spec(args)
    fmt = given.judge_format
    cfg = cfg.for_format(fmt)  # a part the format cannot run is refused here
    inputs = load_inputs(cfg, fmt)  # bad data, or a rubric off the format's scale, fails here, before an engine starts
    spec = run_sync(given.aresolve)  # the served model, asked once
    judge = spec.build()
    try:
        label = given.model or ",".join(given.server)
        record = run_probe(judge, cfg, inputs=inputs, judge_label=label, outage=Outage(outage))
    finally:
        judge.close()
    record["judge_options"] = {k: v for k, v in spec.kwargs().items() if k not in ("store", "api_key")}
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except OSError:  # a full disk: no half-written record left beside -o
        tmp.unlink(missing_ok=True)
        raise
    print(summary(record))
    print(f"\nwrote {out}", file=sys.stderr)
    return 0
