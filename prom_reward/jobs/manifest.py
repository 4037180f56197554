"""The manifest of a job (``OUTPUT.parts/_manifest.json``): the kind, every input file's size, rows and SHA-256,
and the options that change results; a resume refuses any difference, naming it and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prom_reward.errors import OutputError
from prom_reward.format.judge_format import DEFAULT_FORMAT, get_judge_format
from prom_reward.jobs.parts import commit, write_bytes

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


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Save a manifest atomically."""
    data = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    commit(path, lambda p: write_bytes(p, data))
