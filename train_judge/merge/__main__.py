"""Command line: ``python -m train_judge.merge CONFIG.yaml [--check] [--overwrite] [--output DIR]``.

``--check`` validates the config against the checkpoints' headers and prints the plan without
merging. Exit status 2 on a configuration problem (all problems are listed), 0 on success.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys

from prom_reward.cli.voice import PlainHelpFormatter
from prom_reward.errors import PromRewardError

from .config import load_config
from .engine import run_merge
from .plan import make_plan, shard_names


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run (or check) the merge, print a summary; returns the exit status."""
    ap = argparse.ArgumentParser(
        prog="python -m train_judge.merge",
        description="Merge checkpoints and LoRA experts (linear, task_arithmetic, "
        "ties, dare_ties, dare_linear, slerp) as described by a YAML file.",
        formatter_class=PlainHelpFormatter,
    )
    ap.add_argument("config", help="merge YAML (method, base_model, models, parameters, output)")
    ap.add_argument("--output", default=None, help="override the YAML's output folder")
    ap.add_argument("--check", action="store_true", help="validate and show the plan; write nothing")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier, different merge in output")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads for the merge (default 1: the work is on cache-sized chunks)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        cfg = load_config(args.config)
        if args.output:
            cfg = dataclasses.replace(cfg, output=args.output)
        if args.check:
            plan = make_plan(cfg)
            plan.close()
            total = sum(i.nbytes for i in plan.outputs)
            print(
                f"ok: {cfg.method} of {len(cfg.models)} models -> {len(plan.outputs)} tensors, "
                f"{total / 1e6:.1f} MB in {len(plan.shards)} shards ({', '.join(shard_names(len(plan.shards))[:2])}"
                f"{' ...' if len(plan.shards) > 2 else ''}) at {cfg.output}"
            )
            return 0
        r = run_merge(cfg, overwrite=args.overwrite, threads=args.threads)
    except PromRewardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"merged {r.tensors} tensors ({r.total_bytes / 1e6:.1f} MB) with {r.method} into {r.output} "
        f"({r.shards} shards, {r.resumed_shards} resumed) in {r.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
