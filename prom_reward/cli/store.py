"""``prom-reward store info|export STORE [-o OUT]``: look into or export a judgment store."""

from __future__ import annotations

import argparse
import json
import sys
from itertools import islice
from typing import Any, Iterator

from prom_reward.jobs.io import RowWriter


def _batches(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while batch := list(islice(rows, size)):
        yield batch


def cmd_store(args: argparse.Namespace) -> int:
    """``prom-reward store info|export STORE [-o OUT]``: look into or export a judgment store."""
    from pathlib import Path

    from prom_reward.errors import ConfigError
    from prom_reward.backends.store import JudgmentStore

    if not Path(args.path).is_file():
        raise ConfigError(f"{args.path}: no judgment store there (expected the SQLite file given to --store)")
    with JudgmentStore(args.path) as store:
        if args.action == "export":
            if not args.output:
                raise ConfigError("prom-reward store export: give -o OUT.jsonl or -o OUT.parquet")
            with RowWriter(args.output) as writer:
                n = 0
                for batch in _batches(store.entries(), 1000):
                    writer.write(batch)
                    n += len(batch)
            print(f"exported {n} judgments -> {args.output}", file=sys.stderr)
            return 0
        print(json.dumps({"path": str(store.path), "judgments": len(store), "models": store.models(),
                          "integrity": store.integrity_check()}))
    return 0


def add_store_parser(sub: Any) -> None:
    s = sub.add_parser("store", help="look into (info) or export (export -o OUT) a judgment store")
    s.add_argument("action", choices=["info", "export"])
    s.add_argument("path", help="the SQLite judgment store (as given to --store)")
    s.add_argument("-o", "--output", help="export: .jsonl or .parquet")
    s.set_defaults(func=cmd_store)
