"""The ``prom-reward`` command line: the parser of every subcommand, and error handling.

``prom-reward grade IN -o OUT --rubric NAME|FILE [--model M | --server URL ...]``
grades every row of a .jsonl/.json/.parquet file and writes the input rows plus
``score``, ``feedback``, ``expected_score``, ``probabilities``, ``judge_failures``.
Rows are judged in batches and written as they finish; ``--resume`` skips the rows
an interrupted run already wrote. ``prom-reward compare`` does the same with pairwise verdicts for rows
of ``instruction``, ``response_a``, ``response_b`` (both orders unless ``--no-swap``; ``winner``, ``p_a``,
``tie``, ``swap_agreement`` ... ``judge_error``: ``prom_reward.jobs.compare``). ``--ray`` (grade, compare,
pairs) runs the same job as a Ray Data pipeline on ``--replicas N|all`` judge replicas, locally or on
the cluster of ``--address`` / ``RAY_ADDRESS`` (``prom_reward.jobs.ray_run``, docs/serving.md).

``prom-reward pairs IN -o OUT.jsonl --strategy best_vs_worst|all_pairs --min-margin X
--rubric NAME|FILE [--model M | --server URL ...] [--num-samples k] [--resume]`` turns rows of
``prompt`` + ``completions`` into DPO preference pairs (``prom_reward.preferences.build``), writing them
chunk by chunk with ``OUT.skipped.jsonl`` and ``OUT.progress.json`` beside them; ``--resume``
continues after the last finished chunk. The stats are printed as one JSON line on stdout.

``prom-reward store info|export STORE [-o OUT.jsonl|.parquet]`` shows or exports a judgment store.

``prom-reward reward-server --server URL --failure-reward NUMBER|min`` serves the judge to OpenRLHF
(``--reward.remote_url http://...``); ``prom-reward openrlhf-func-path`` prints the ``reward_func``
file for ``--reward.remote_url path.py`` (docs/openrlhf.md).

Example:
    $ prom-reward grade rollouts.jsonl -o graded.jsonl --rubric helpfulness --model smollm2-135m-instruct
    $ prom-reward compare ab.jsonl -o verdicts.jsonl --rubric helpfulness --server URL
    $ prom-reward pairs samples.jsonl -o pairs.jsonl --strategy all_pairs --rubric helpfulness --server URL
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from prom_reward.cli.jobs import add_job_parsers
from prom_reward.cli.probe import add_probe_parser
from prom_reward.cli.report import add_report_parser
from prom_reward.cli.servers import add_server_parsers
from prom_reward.cli.store import add_store_parser
from prom_reward.errors import PromRewardError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prom-reward", description="Prometheus-style judges as rewards.")
    sub = p.add_subparsers(dest="command", required=True)
    add_job_parsers(sub)
    add_server_parsers(sub)
    add_store_parser(sub)
    add_probe_parser(sub)
    add_report_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("grade", "compare", "pairs") and not args.model and not args.server:
        print(f"prom-reward {args.command}: give --model M (in-process vLLM) or --server URL", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except PromRewardError as e:
        print(f"prom-reward: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
