"""The ``prom-reward`` command line: the parser of every subcommand, and error handling (one line ``prom-reward:
error: <what>; fix: <how>``, exit 2; a job whose backend failed some rows exits 3, an unreachable judge 4)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence

from prom_reward.cli.jobs import add_job_parsers, add_store_parser
from prom_reward.cli.report import add_probe_parser, add_report_parser
from prom_reward.cli.servers import add_server_parsers
from prom_reward.cli.voice import CliParser, print_error, user_terms, with_fix
from prom_reward.errors import BackendError, JudgeUnavailableError, PromRewardError
from prom_reward.jobs.summary import EXIT_JUDGE_DOWN

DEBUG_HELP = "show the full traceback of an error instead of one line"

JOBS = ("grade", "compare", "pairs")
"""The file jobs: they commit their output in parts, and ``--resume`` continues one that was stopped."""
JUDGING = (*JOBS, "probe", "reward-server")
"""The commands that call a judge: a judge that cannot be reached ends them with ``EXIT_JUDGE_DOWN``."""


def build_parser() -> argparse.ArgumentParser:
    p = CliParser(prog="prom-reward", description="Prometheus-style judges as rewards.")
    p.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = p.add_subparsers(dest="command", required=True)
    for add in (add_job_parsers, add_server_parsers, add_store_parser, add_probe_parser, add_report_parser):
        add(sub)
    for command in sub.choices.values():  # also after the subcommand: prom-reward grade ... --debug
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return p


def explain(e: BaseException, names: dict[str, str] | None = None) -> str | None:
    """The one-line message of an error a person can act on, its settings said as ``names`` (None: a bug)."""
    if isinstance(e, BackendError) and "fix:" not in str(e):
        return f"{e}; fix: check that the judge is up and --server (or --model) names it, then run again"
    if isinstance(e, PromRewardError):
        return e.said(names)
    if isinstance(e, OSError):  # a path the job engine did not name itself
        if e.filename is None:
            return f"{e}; fix: check the paths given, their permissions and the free space of their disk"
        return f"{e.filename}: {e.strerror or e}; fix: check the path, its permissions and the free space of its disk"
    if isinstance(e, sqlite3.Error):
        return (
            f"judgment store: {e}; fix: check the --store file (prom-reward store info STORE), or give another --store"
        )
    if isinstance(e, MemoryError):
        return "out of memory; fix: lower --batch-size"
    return None


def _command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand, whose --help lists its flags
        _command(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command in (*JOBS, "probe") and not args.model and not args.server:
        print_error(f"{args.command}: no judge given; fix: give --model M (in-process vLLM) or --server URL")
        return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        if args.debug:
            raise
        said = "; what was committed is kept: run again with --resume to continue" if args.command in JOBS else ""
        print(f"prom-reward: interrupted{said}", file=sys.stderr)
        return 130
    except Exception as e:
        command = _command(parser, args.command)
        message = explain(e, user_terms(command))
        if args.debug or message is None:
            raise
        if isinstance(e, (BackendError, JudgeUnavailableError)) and args.command in JUDGING:  # the judge is down
            where = " ".join(vars(args).get("server") or []) or vars(args).get("model")
            print_error(
                f"{args.command}: the judge {where} could not be reached or refused every request: {e}; fix: start "
                "the judge (or correct --server), then run again"
            )
            return EXIT_JUDGE_DOWN
        print_error(with_fix(message, command.prog))
        return 2


if __name__ == "__main__":
    sys.exit(main())
