"""Preparing a job before anything is written: the output's rules, the whole input checked, the manifest
(``OUTPUT.parts/_manifest.json``: the kind, every input file's size, rows and SHA-256, the options that change results)
compared on resume, the part folder repaired, and the batches left to judge (docs/jobs.md has the steps)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError, OutputError
from prom_reward.format.judge_format import DEFAULT_FORMAT, get_judge_format
from prom_reward.jobs.parts import changed_part, clear_parts, commit, done_parts, failed_parts, output_error, part_ids
from prom_reward.jobs.scan import Scan, scan_input
from prom_reward.jobs.source import KINDS, expand_inputs
from prom_reward.jobs.spec import JobConfig, JobKind
from prom_reward.jobs.summary import JobSummary

VERSION = 1
NAME = "_manifest.json"
_NOT_RESULTS = frozenset(
    "base_url store tensor_parallel_size enforce_eager engine_options timeout backoff max_in_flight api_key "
    "eject_after probe_interval gpu_memory_utilization".split()
)
"""Judge options that do not change what the judge says (where it runs, how it is reached)."""


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "to_dict"):
        return _plain(value.to_dict())
    return type(value).__name__  # an object (a Backend ...): its kind


def judge_fingerprint(judge: Any) -> dict[str, Any]:
    """The judge options that change results: of ``PrometheusJudge`` keyword arguments, or of a built judge."""
    if isinstance(judge, dict):  # the format by its name (a YAML file's: its name and content digest)
        named = {k: get_judge_format(v).name if k == "format" and v else v for k, v in judge.items()}
        return {k: _plain(v) for k, v in sorted(named.items()) if k not in _NOT_RESULTS}
    return {  # behind a judgment store: the fingerprint of the backend it wraps, built or not
        "backend": judge.backend.fingerprint,
        "sampling": _plain(judge.sampling),
        "num_samples": judge.capabilities.num_samples,
        "max_retries": judge.max_retries,
        "force_verdict": judge.force_verdict,
        "truncate_response": judge.truncate_response,
        "neutralize_markers": judge.capabilities.neutralize_markers,
        "max_tie_rounds": judge.capabilities.max_tie_rounds,
        # the judge format when not the default (manifests written before formats existed still match)
        **({"format": judge.format.name} if judge.format.name != DEFAULT_FORMAT else {}),
    }


def make_manifest(
    job: str, inputs: list[dict[str, Any]], options: dict[str, Any], judge: dict[str, Any], fmt: str
) -> dict[str, Any]:
    """The manifest of a job."""
    return {
        "version": VERSION,
        "job": job,
        "inputs": inputs,
        "options": _plain(options),
        "judge": _plain(judge),
        "format": fmt,
    }


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between the manifest of an output and the job at hand (empty: the same job)."""
    out = []
    if saved.get("version") != now["version"]:
        return [f"manifest version {saved.get('version')!r} then, {now['version']} now"]
    if saved.get("job") != now["job"]:
        out.append(f"job {saved.get('job')!r} then, {now['job']!r} now")
    a, b = saved.get("inputs") or [], now["inputs"]
    if len(a) != len(b):
        out.append(f"{len(a)} input file(s) then, {len(b)} now")
    for x, y in zip(a, b, strict=False):
        changed = [k for k in ("size", "rows", "sha256") if x.get(k) != y.get(k)]
        if changed:
            out.append(
                f"input {y['path']}: not the file {x.get('path')} was ({', '.join(changed)} differ: "
                f"{x.get('rows')} rows of {x.get('size')} bytes then, {y['rows']} rows of {y['size']} now)"
            )
    for group, label in (("options", "option"), ("judge", "judge option")):
        x, y = saved.get(group) or {}, now[group]
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                out.append(f"{label} {k}: {_short(x.get(k))} then, {_short(y.get(k))} now")
    if saved.get("format") != now["format"]:
        out.append(f"output format {saved.get('format')!r} then, {now['format']!r} now")
    return out


def read_manifest(path: Path) -> dict[str, Any]:
    """A saved manifest; ``OutputError`` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OutputError(
            f"{path}: not a readable job manifest ({e}); fix: start over with --overwrite, or write to another -o"
        ) from None
    inputs = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(inputs, list) or not all(
        isinstance(x, dict) for x in [*inputs, data.get("options"), data.get("judge")]
    ):
        raise OutputError(f"{path}: not a job manifest; fix: start over with --overwrite, or write to another -o")
    return data


SKIPPED = "skipped"
"""The sub-folder of a pairs job's part folder with the skip records, one part per batch."""


@dataclass(frozen=True)
class Target:
    """Where a job writes: ``output`` (merged from the part ``folder`` when ``merged``), in ``fmt``, and pairs' skip
    records (``skipped``)."""

    output: Path
    merged: bool
    folder: Path
    fmt: str
    skipped: Path | None
    schema: Any = None
    """The Parquet parts' schema (``Scan.schema``: set once the input is checked)."""


def target(output: str | Path, kind: JobKind) -> Target:
    """The ``Target`` of an output path (errors for what cannot be written there)."""
    out = Path(output)
    suffix = out.suffix.lower()
    if KINDS.get(suffix) in ("jsonl", "parquet"):
        fmt, merged, folder = KINDS[suffix], True, out.with_name(out.name + ".parts")
    elif suffix == ".json":
        raise ConfigError(f"{out}: a JSON array cannot be written row by row; fix: use a .jsonl or .parquet output")
    elif suffix:
        raise ConfigError(
            f"{out}: unsupported output type {suffix!r}; fix: use .jsonl or .parquet (or a folder "
            "name without a suffix for the part files alone)"
        )
    else:
        merged, folder, fmt = False, out, "jsonl" if kind.jsonl_only else "parquet"
    if kind.jsonl_only and fmt != "jsonl":
        raise ConfigError(
            f"{out}: {kind.name} are written as JSON lines (prompts may be strings or message lists); "
            "fix: use a .jsonl output"
        )
    parent = out.absolute().parent
    problems = {  # the first that holds
        f"the folder {parent} does not exist; fix: create it or choose another -o": not parent.exists(),
        f"{parent} is a file, not a folder; fix: choose another -o": not parent.is_dir(),
        "it is a folder; fix: choose a file name for -o": merged and out.is_dir(),
        f"permission denied in {parent}; fix: make it writable or choose another -o": not os.access(parent, os.W_OK),
    }
    why = next((why for why, holds in problems.items() if holds), None)
    if why is not None:
        raise OutputError(f"{out}: cannot write: {why}")
    skipped = out.with_name(out.name[: -len(suffix)] + ".skipped.jsonl") if kind.name == "pairs" and merged else None
    return Target(out, merged, folder, fmt, skipped)


@dataclass
class Plan:
    """A prepared job."""

    kind: JobKind
    target: Target
    scan: Scan
    summary: JobSummary
    """The run's counts, from what the plan found (resumed, retried, repaired) on."""
    shards: list[dict[str, Any]] = field(default_factory=list)
    """The batches left: ``start``, ``stop`` (ids), and where to read them."""


def prepare_job(kind: JobKind, inputs: Any, output: str | Path, judge: dict[str, Any], cfg: JobConfig) -> Plan:
    """The plan of a job (docs/jobs.md); ``judge``: the judge's fingerprint."""
    tgt = target(output, kind)
    files = expand_inputs(inputs)
    _refuse_overlap(tgt, inputs, files)
    manifest_path = tgt.folder / NAME
    parts = done_parts(tgt.folder) if tgt.folder.is_dir() else {}
    exists = tgt.output.exists() if tgt.merged else bool(parts) or manifest_path.exists()
    if not cfg.resume and not cfg.overwrite and (exists or parts):
        why = f"a job writing it was interrupted (its committed batches are in {tgt.folder})"
        raise OutputError(
            f"{tgt.output}: {'exists' if tgt.output.exists() else why}; fix: --resume continues the job that wrote "
            "it, --overwrite starts over (the old output stays intact until the new one is complete), or choose "
            "another -o"
        )
    saved = None
    if cfg.resume:
        if manifest_path.exists():
            saved = read_manifest(manifest_path)
        elif exists or parts:
            raise OutputError(
                f"{tgt.output}: no record of the job that wrote it ({manifest_path} is missing), so it "
                "cannot be resumed safely; fix: --overwrite to judge it again, or choose another -o"
            )
    starts = frozenset(b for _, b in parts) if saved else frozenset()
    scan = scan_input(kind, files, cfg.batch_size, starts, want_schema=tgt.fmt == "parquet")
    manifest = make_manifest(kind.name, scan.inputs, kind.fingerprint(), judge, tgt.fmt)
    plan = Plan(kind, replace(tgt, schema=scan.schema), scan, JobSummary(job=kind.name, output=str(tgt.output)))
    if saved is not None:
        if diffs := differences(saved, manifest):
            raise OutputError(
                f"{tgt.output}: written by another job ({'; '.join(diffs)}); fix: resume with the same "
                "input and options, start over with --overwrite, or choose another -o"
            )
        done = _check_parts(plan)
    else:
        try:
            tgt.folder.mkdir(exist_ok=True)
        except OSError as e:
            raise output_error(tgt.folder, e) from e
        clear_parts(tgt.folder)
        clear_parts(tgt.folder / SKIPPED)
        commit(manifest_path, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8"))  # atomically
        done = []
    plan.summary.resumed_rows = sum(hi - lo for lo, hi in (scan.span(a, b) for a, b in done))  # input rows
    plan.shards = _shards(plan, done, cfg.batch_size)
    return plan


def _refuse_overlap(tgt: Target, inputs: Any, files: list[str]) -> None:
    """``OutputError`` for an output that is (or, in a later run, would be read as) part of the input."""
    given = [str(p) for p in ([inputs] if isinstance(inputs, (str, Path)) else inputs)]
    written = [p.resolve() for p in (tgt.output, tgt.skipped) if p is not None and tgt.merged]
    folder = tgt.folder.resolve()
    for f in (Path(f).resolve() for f in files if "://" not in f):
        if f in written or folder in f.parents:
            raise OutputError(
                f"{tgt.output}: cannot write: the job would write over its input file {f}; fix: choose another -o"
            )
    listed = [g for g in given if "://" not in g and os.path.isdir(g) and not os.path.exists(f"{g}/state.json")]
    for d in (Path(g).resolve() for g in listed):  # a folder stands for its files (a save_to_disk one: its list)
        for w in written:
            if w.parent == d and KINDS.get(w.suffix.lower()) in ("jsonl", "parquet"):
                raise OutputError(
                    f"{w}: cannot write: it is in the input folder {d}, so a later run (--resume, --overwrite) "
                    "would read it as input; fix: choose an -o outside that folder"
                )


def _check_parts(plan: Plan) -> list[tuple[int, int]]:
    """The parts of a resumed job that stand; the others are removed, to be judged again."""
    folder, pairs = plan.target.folder, plan.kind.name == "pairs"
    plan.summary.repaired_parts += sum(clear_parts(f, temporaries=True) for f in (folder, folder / SKIPPED))
    failed = failed_parts(folder)
    done: list[tuple[int, int]] = []
    parts = done_parts(folder)
    for (a, b), path in sorted(parts.items()):
        marker = path.with_name("_failed-" + path.name)
        companion = folder / SKIPPED / path.name
        if (a, b) in failed:
            path.unlink()
            marker.unlink(missing_ok=True)
            companion.unlink(missing_ok=True)
            lo, hi = plan.scan.span(a, b)
            plan.summary.retried_rows += hi - lo
            continue
        if b > plan.scan.rows or (done and a < done[-1][1]):
            raise OutputError(
                f"{path}: rows {a}..{b - 1} do not fit this input of {plan.scan.rows} rows or overlap "
                "another part; fix: start over with --overwrite, or choose another -o"
            )
        ids = part_ids(path)
        extra = part_ids(companion) if pairs and companion.exists() else ([] if not pairs else None)
        if ids is None or extra is None:  # cut short, or a pairs part without its skip records
            path.unlink()
            companion.unlink(missing_ok=True)
            plan.summary.repaired_parts += 1
            continue
        lo, hi = plan.scan.span(a, b)  # the input rows of the part's rows (groups: their first rows on)
        ok = all(lo <= i < hi for i in ids + extra) and ids == sorted(ids) if pairs else ids == list(range(a, b))
        if not ok:
            raise changed_part(path, f"its rows are not rows {a}..{b - 1} of the input")
        done.append((a, b))
    if pairs:  # skip records whose pairs part was never committed
        for (a, b), path in done_parts(folder / SKIPPED).items():
            if (a, b) not in done:
                path.unlink()
    return done


def _shards(plan: Plan, done: list[tuple[int, int]], batch_size: int) -> list[dict[str, Any]]:
    """The batches of the rows not in ``done``: none across a multiple of ``batch_size`` or a file's end."""
    files, shards, f, s = plan.scan.files, [], 0, 0
    for a, b in [*sorted(done), (plan.scan.rows, plan.scan.rows)]:
        while s < a:
            while f + 1 < len(files) and files[f][2] <= s:
                f += 1
            path, first, end = files[f] if files else ("", 0, a)
            e = min(a, (s // batch_size + 1) * batch_size, end if end > s else a)
            offset, line = (0, 1) if s == first else plan.scan.offsets.get(s, (0, 1))
            shards.append({"start": s, "stop": e, "path": path, "first_id": first, "offset": offset, "line": line})
            s = e
        s = max(s, b)
    return shards
