"""``prom-reward store info|export STORE [-o OUT]``: look into or export a judgment store."""

from __future__ import annotations

import argparse
import json
import sys
from itertools import islice
from typing import Any

from prom_reward.jobs.parts import write_rows


def cmd_store(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prom_reward.backends.store import JudgmentStore
    from prom_reward.errors import ConfigError

    if not Path(args.path).is_file():
        raise ConfigError(f"{args.path}: no judgment store there; fix: give the SQLite file given to --store")
    if args.action == "export" and not args.output:
        raise ConfigError("store export: no output; fix: give -o OUT.jsonl or -o OUT.parquet")
    with JudgmentStore(args.path, timeout=args.timeout, create=False) as store:
        if args.action == "export":
            rows = store.entries()
            n = write_rows(args.output, iter(lambda: list(islice(rows, 1000)), []))  # batches of 1,000
            print(f"exported {n} judgments -> {args.output}", file=sys.stderr)
            return 0
        print(
            json.dumps(
                {
                    "path": str(store.path),
                    "judgments": len(store),
                    "models": store.models(),
                    "integrity": store.integrity_check(),
                }
            )
        )
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
