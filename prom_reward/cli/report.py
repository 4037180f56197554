"""``prom-reward report``: one self-contained HTML page for a graded or compared file, with the probe's results when
given (``prom_reward.report``); ``prom-reward probe``: how exploitable a judge is, as JSON plus a one-screen summary
(``prom_reward.probe``; docs/hacking.md). Each writes one file (``-o``), checked before anything runs, written whole."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.cli.voice import (
    add_judge_options,
    add_outage_options,
    add_store_options,
    judge_format_name,
    judge_spec,
    outage_policy,
)
from prom_reward.declared import add_settings, given_settings
from prom_reward.errors import ConfigError, InputError, PromRewardError
from prom_reward.format.columns import DEFAULTS, column_flag
from prom_reward.format.rubrics import RUBRICS
from prom_reward.jobs.plan import NAME, read_manifest
from prom_reward.jobs.source import read_rows
from prom_reward.probe.run import ProbeConfig, load_inputs, run_probe
from prom_reward.probe.summary import summary as probe_summary
from prom_reward.report.html import probe_section, render_report
from prom_reward.report.summarize import ReportColumns, recorded_format, summarize
from prom_reward.rewards.outage import Outage, OutagePolicy


def output_file(given: str, suffixes: tuple[str, ...], what: str) -> Path:
    """``-o given``: a file named ``*<suffixes[0]>`` (or another of ``suffixes``) in a folder that exists, else
    ``ConfigError`` (``what``: what the command writes, said when the name is wrong)."""
    out = Path(given)
    if out.suffix.lower() not in suffixes:
        raise ConfigError(f"-o {given}: {what}; fix: name a {suffixes[0]} file")
    if not out.parent.is_dir():
        raise ConfigError(f"-o {given}: folder {out.parent} does not exist; fix: create it or choose another -o")
    if out.is_dir():
        raise ConfigError(f"-o {given}: that is a folder; fix: name a {suffixes[0]} file")
    return out


def write_whole(out: Path, data: bytes) -> None:
    """Write ``data`` to ``out`` through a temporary file beside it (a full disk leaves neither half-written)."""
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def add_report_parser(sub: Any) -> None:
    """Register ``prom-reward report``."""
    p = sub.add_parser(
        "report",
        help="an HTML report of a graded file (plots, failures, per-rubric tables, extreme rows, probe results)",
    )
    p.add_argument(
        "input",
        help="prom-reward grade or compare output: a .jsonl, .json or .parquet file, or a folder of part files "
        "(an -o without a suffix, or the .parts folder beside a merged output)",
    )
    p.add_argument("-o", "--output", required=True, help="the report (.html)")
    p.add_argument("--probe", help="a prom-reward probe record (.json) to include")
    p.add_argument("--title", help="page title (default: the input's file name)")
    p.add_argument(
        "--format",
        type=judge_format_name,
        help="the judge format the file was judged in, for a file without a job record (default: the recorded "
        "format, else prometheus2); a file whose record names another format is refused",
    )
    p.add_argument("--extremes", type=int, default=5, help="highest and lowest scored rows to show (default 5)")
    for field in fields(ReportColumns):
        option = f"{field.name}_column"
        ours, *trl = DEFAULTS[option]
        p.add_argument(
            column_flag(option),
            dest=option,
            metavar="COLUMN",
            help="column to group by source (default: the first of source, data_source, response_source, category, "
            "model)"
            if field.name == "source"
            else f"the column holding the {field.name.replace('_', ' ')} (default: the job's, else {ours}"
            + (f", else TRL's {trl[0]}" if trl else "")
            + "); a column named here must be in every row",
        )
    p.set_defaults(func=cmd_report)


def _probe_record(path: str) -> dict[str, Any]:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(
            f"--probe {path}: cannot read a probe record ({e}); fix: give the .json that prom-reward probe wrote",
            field="probe",
        ) from e
    if not isinstance(record, dict) or not ({"llmbar", "shifts"} & set(record)):
        raise InputError(
            f"--probe {path}: not a prom-reward probe record (no 'llmbar' or 'shifts'); fix: give the .json that "
            "prom-reward probe wrote",
            field="probe",
        )
    try:
        probe_section(record)  # a record the page cannot show fails here, before the graded file is read
    except InputError as e:
        raise InputError(f"--probe {path}: {e}", field="probe") from None
    return record


def job_record(output: Path) -> dict[str, Any] | None:
    """The manifest of the job that wrote ``output`` (``OUTPUT.parts/_manifest.json``, or inside a folder of parts),
    or None when there is no readable one."""
    manifest = output / NAME if output.is_dir() else output.with_name(output.name + ".parts") / NAME
    try:
        return read_manifest(manifest) if manifest.is_file() else None
    except PromRewardError:
        return None


def job_rubric(rubric: Any) -> Any:
    """The ``--rubric`` a job recorded (its manifest's), a built-in one as its name."""
    if not isinstance(rubric, dict):
        return rubric
    recorded = (rubric.get("criteria"), list(rubric.get("descriptions") or ()))
    same = (name for name in RUBRICS if recorded == (RUBRICS.get(name).criteria, list(RUBRICS.get(name).descriptions)))
    return next(same, rubric)


def cmd_report(args: argparse.Namespace) -> int:
    out = output_file(args.output, (".html", ".htm"), "the report is one HTML page")
    if not Path(args.input).exists():
        raise InputError(
            f"{args.input}: no such file or folder; fix: give a prom-reward grade or compare output (a file, or its "
            "folder of part files)",
            field="input",
        )
    if args.extremes < 0:
        raise ConfigError(f"--extremes: expected a number >= 0, got {args.extremes}")
    probe = _probe_record(args.probe) if args.probe else None
    record = job_record(Path(args.input))
    options = (record or {}).get("options")
    options = options if isinstance(options, dict) else {}
    flags = {f.name: getattr(args, f"{f.name}_column") for f in fields(ReportColumns)}  # given, else the job's
    columns = {name: options.get(f"{name}_column") if v is None else v for name, v in flags.items()}
    try:
        summary = summarize(
            read_rows(args.input),
            ReportColumns(**{name: v for name, v in columns.items() if isinstance(v, str)}),
            extremes=args.extremes,
            rubric=job_rubric(options.get("rubric")),
            judge_format=recorded_format(record, args.format),
        )
    except InputError as e:
        if str(e).startswith((str(args.input), str(Path(args.input)))):  # it names its file already
            raise
        raise InputError(f"{args.input}: {e}", index=e.index, field=e.field) from e  # say which input
    page = render_report(
        summary,
        probe,
        title=args.title or Path(args.input).name,
        source=str(args.input),
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
    write_whole(out, page.encode("utf-8", "replace"))  # a lone surrogate in a text (a JSON escape) as "?"
    print(f"wrote {out} ({summary['n']} rows, {len(page) // 1024} KiB)", file=sys.stderr)
    return 0


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
    # a part the format cannot run, bad data or a rubric off the format's scale fails here, before an engine starts
    inputs = load_inputs(cfg, given.judge_format)
    spec = run_sync(given.aresolve)  # the served model, asked once
    judge = spec.build()
    try:
        label = given.model or ",".join(given.server)
        record = run_probe(judge, cfg, inputs=inputs, judge_label=label, outage=Outage(outage))
    finally:
        judge.close()
    record["judge_options"] = {k: v for k, v in spec.kwargs().items() if k not in ("store", "api_key")}
    write_whole(out, (json.dumps(record, indent=1, default=str) + "\n").encode("utf-8"))
    print(probe_summary(record))
    print(f"\nwrote {out}", file=sys.stderr)
    return 0
