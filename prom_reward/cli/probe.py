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
from prom_reward.cli.voice import output_file, write_whole
from prom_reward.declared import add_settings, given_settings
from prom_reward.errors import ConfigError
from prom_reward.probe.run import ProbeConfig, load_inputs, run_probe
from prom_reward.probe.summary import summary
from prom_reward.rewards.outage import Outage, OutagePolicy

PROBE_OUTAGE = OutagePolicy(on_exhausted="raise")
"""The probe's outage policy unless given: a judge that fails is waited out for ``budget_s`` (150 s) from its first
failure, then the probe stops (exit 4, nothing written): a record measured on missing judgments would mislead."""
FLAGS = ("llmbar", "items", "limit", "parts", "edits", "rubric", "baseline_samples", "seed")
"""The ``ProbeConfig`` settings ``prom-reward probe`` has a flag for (``--expected`` is the judge's)."""


def add_probe_parser(sub: Any) -> None:
    """Register ``prom-reward probe``."""
    p = sub.add_parser(
        "probe",
        help="measure how exploitable a judge is (LLMBar adversarial accuracy, score shifts under response edits)",
        epilog="exit status: 0 the record was written; 2 bad input, options or a misconfigured judge (nothing "
        "written); 4 the judge could not be reached or refused every request (the error names the URL first)",
    )
    p.add_argument("-o", "--output", required=True, help="the probe record (.json)")
    add_settings(p, ProbeConfig, FLAGS)
    add_judge_options(p)
    add_store_options(p)
    add_outage_options(p, PROBE_OUTAGE, "records the unanswered judgments as failures")
    p.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    out = output_file(args.output, (".json",), "the probe writes one JSON record")
    if args.items and out.resolve() == Path(args.items).resolve():
        raise ConfigError(f"-o {args.output}: that is the --items file; fix: write the record to another file")
    if args.llmbar and out.resolve().parent == Path(args.llmbar).resolve():
        raise ConfigError(f"-o {args.output}: that is in the --llmbar folder; fix: write the record elsewhere")
    cfg = ProbeConfig(**given_settings(args, ProbeConfig, FLAGS), expected=args.expected)
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
    write_whole(out, (json.dumps(record, indent=1, default=str) + "\n").encode("utf-8"))
    print(summary(record))
    print(f"\nwrote {out}", file=sys.stderr)
    return 0
