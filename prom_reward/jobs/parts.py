"""The one writer of every job: part files committed atomically (temporary name, fsync, rename), failed-batch
markers for a resume, and the merge into the output; an ``OSError`` is an ``OutputError`` naming the file and fix."""

from __future__ import annotations

import base64
import datetime
import decimal
import errno
import json
import os
import re
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prom_reward.errors import OutputError

PART = re.compile(r"^part-(\d{12})-(\d{12})\.(parquet|jsonl)$")
FAILED_PREFIX = "_failed-"
"""A part ``P`` the backend failed for has a marker ``_failed-P`` beside it (``_``: not read as data)."""
TMP_PREFIX = "_tmp-"
CRASH_HOOK = "PROM_REWARD_JOB_CRASH"
"""Test hook: ``part:START:MARKER`` SIGKILLs the process about to commit the part starting at id START,
``merge:MARKER`` the one about to move the merged output into place, once (while MARKER does not exist);
``enospc:`` before either raises ``OSError(ENOSPC)`` there instead, as a full disk would."""


def crash_point(point: str, start: int | None = None) -> None:
    """``CRASH_HOOK``: die here (SIGKILL), or fail as a full disk, when the hook names this point."""
    spec = os.environ.get(CRASH_HOOK, "")
    full = spec.startswith("enospc:")
    kind, _, rest = spec.removeprefix("enospc:").partition(":")
    at, _, marker = rest.partition(":") if point == "part" else ("", "", rest)
    if not spec or kind != point or (point == "part" and int(at) != start) or os.path.exists(marker):
        return
    Path(marker).touch()
    if full:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    os.kill(os.getpid(), signal.SIGKILL)


_FREE = (
    "; fix: free space there (or choose another -o), then run again with --resume: the rows already committed are kept"
)
_DENIED = "permission denied; fix: make the folder writable or choose another -o"
_FIXES = {
    errno.ENOSPC: "the disk is full" + _FREE,
    errno.EDQUOT: "the disk quota is used up" + _FREE,
    errno.EROFS: "the file system is read-only; fix: choose another -o",
    errno.EACCES: _DENIED,
    errno.EPERM: _DENIED,
    errno.ENOENT: "its folder does not exist; fix: create the folder or choose another -o",
    errno.ENOTDIR: "a part of its path is a file, not a folder; fix: choose another -o",
    errno.EISDIR: "it is a folder; fix: choose a file name for -o",
}


def output_error(path: str | Path, e: OSError) -> OutputError:
    """An ``OutputError`` for ``e`` raised while writing ``path``: what happened and the fix."""
    why = _FIXES.get(e.errno or 0, f"{e.strerror or e}; fix: check the disk and the path, or choose another -o")
    return OutputError(f"{path}: cannot write: {why}")


def write_bytes(path: Path, data: bytes | Callable[[Any], None]) -> None:
    """Write a new file (bytes, or a function that writes to the open file), flushed and fsynced."""
    with open(path, "wb") as f:
        data(f) if callable(data) else f.write(data)
        f.flush()
        os.fsync(f.fileno())


def json_value(value: Any) -> Any:
    """A value JSON has no type for (from a Parquet or Arrow input) as JSON lines hold it: dates and times as ISO
    8601 text, a duration as seconds, a decimal as its exact text, bytes as base64 text."""
    if isinstance(value, (datetime.date, datetime.time)):  # datetime.datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"{type(value).__name__} values cannot be written as JSON")


def jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    """Rows as JSON lines; a row holding a lone surrogate is written with ``\\u`` escapes (UTF-8 cannot hold it)."""
    text = "".join(json.dumps(r, ensure_ascii=False, default=json_value) + "\n" for r in rows)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # escaped: only the rows that hold one
        if len(rows) == 1:
            return (json.dumps(rows[0], default=json_value) + "\n").encode("ascii")
        return b"".join(jsonl_bytes([r]) for r in rows)


def commit(final: Path, data: bytes | Callable[[Any], None], point: str = "", start: int | None = None) -> None:
    """Write ``data`` (as ``write_bytes``) to ``final`` via a temporary file, renamed; ``OSError``: ``OutputError``."""
    tmp = final.with_name(f"{TMP_PREFIX}{os.getpid()}-{final.name}")
    try:
        write_bytes(tmp, data)
        if point:
            crash_point(point, start)
        os.replace(tmp, final)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise output_error(final, e) from e


def write_part(
    folder: str | Path,
    start: int,
    stop: int,
    rows: list[dict[str, Any]],
    fmt: str,
    schema: Any = None,
    failed: str | None = None,
) -> Path:
    """Commit one batch's rows as a part; ``failed``: why the backend failed for it (marked: a resume judges it
    again)."""
    folder = Path(folder)
    final = folder / f"part-{start:012d}-{stop:012d}.{fmt}"
    marker = folder / (FAILED_PREFIX + final.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error(folder, e) from e
    if failed is not None:
        commit(marker, failed.encode("utf-8"))

    def parquet(f: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows, schema=schema), f)

    commit(final, jsonl_bytes(rows) if fmt == "jsonl" else parquet, "part", start)
    if failed is None:
        marker.unlink(missing_ok=True)
    return final


def _files(folder: str | Path) -> list[Path]:
    p = Path(folder)
    return [p / name for name in os.listdir(p)] if p.is_dir() else []


def done_parts(folder: str | Path) -> dict[tuple[int, int], Path]:
    """The part files in a part folder, by ``(start, stop)`` (backend-failed ones included)."""
    return {(int(m[1]), int(m[2])): p for p in _files(folder) if (m := PART.match(p.name))}


def failed_parts(folder: str | Path) -> dict[tuple[int, int], Path]:
    """The parts of ``done_parts`` written after the judge backend failed (to judge again on resume)."""
    return {k: p for k, p in done_parts(folder).items() if p.with_name(FAILED_PREFIX + p.name).exists()}


def clear_parts(folder: str | Path, temporaries: bool = False) -> int:
    """Remove what a job left in a part folder: parts, markers, temporary files (nothing else); ``temporaries``: only
    those a killed writer left (half-written parts). Returns how many."""
    gone = [p for p in _files(folder) if p.name.startswith(TMP_PREFIX)]
    if not temporaries:
        gone += [p for p in _files(folder) if PART.match(p.name) or p.name.startswith(FAILED_PREFIX)]
    for p in gone:
        p.unlink(missing_ok=True)
    return len(gone)


def part_ids(path: Path) -> list[int] | None:
    """The ``source_index`` of every row of a part, or None when it is cut short (a torn write: judged again)."""
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return [int(x) for x in pq.read_table(path, columns=["source_index"]).column(0).to_pylist()]
        except (pa.ArrowInvalid, OSError, KeyError) as e:
            if "magic bytes" in str(e) or "footer" in str(e).lower():
                return None
            raise changed_part(path, f"not a readable part ({e})") from None
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        return None
    ids = []
    for lineno, line in enumerate(data.splitlines(), 1):
        try:
            ids.append(int(json.loads(line)["source_index"]))
        except (ValueError, KeyError, TypeError):
            raise changed_part(path, f"line {lineno} is not a row this job wrote") from None
    return ids


def changed_part(path: Path, why: str) -> OutputError:
    """``OutputError``: the part ``path`` was changed after it was written (``why``), and the fix."""
    return OutputError(
        f"{path}: {why}; it was changed after it was written; fix: delete that part file and run "
        "again with --resume (its rows are judged again), or start over with --overwrite"
    )


def merge_parts(folder: str | Path, output: str | Path, fmt: str, schema: Any = None) -> int:
    """Concatenate the part files in id order into ``output``; returns the rows written."""
    out = Path(output)
    parts = [p for _, p in sorted(done_parts(folder).items())]
    count = [0]

    def jsonl(f: Any) -> None:
        for p in parts:
            with open(p, "rb") as src:
                while chunk := src.read(1 << 20):
                    f.write(chunk)
                    count[0] += chunk.count(b"\n")

    def parquet(f: Any) -> None:
        import pyarrow.parquet as pq

        with pq.ParquetWriter(f, schema) as w:
            for p in parts:
                table = pq.read_table(p, schema=schema)
                w.write_table(table)
                count[0] += table.num_rows

    commit(out, jsonl if fmt == "jsonl" else parquet, "merge")
    return count[0]


def write_rows(output: str | Path, batches: Iterable[list[dict[str, Any]]]) -> int:
    """Write batches of rows to a new .jsonl or .parquet file; returns the rows written. Parquet columns take their
    types from the first batch (nested values as JSON text)."""
    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".parquet", ".pq"):
        raise OutputError(f"{out}: unsupported output type {suffix!r}; fix: use .jsonl or .parquet")
    count = [0]

    def jsonl(f: Any) -> None:
        for rows in batches:
            f.write(jsonl_bytes(rows))
            count[0] += len(rows)

    def parquet(f: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = None
        try:
            for rows in batches:
                flat = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()} for r in rows]
                if writer is None:
                    inferred = pa.Table.from_pylist(flat).schema
                    schema = pa.schema(
                        [pa.field(x.name, pa.string()) if pa.types.is_null(x.type) else x for x in inferred]
                    )
                    writer = pq.ParquetWriter(f, schema)
                writer.write_table(pa.Table.from_pylist(flat, schema=writer.schema))
                count[0] += len(rows)
        finally:
            if writer is not None:
                writer.close()

    commit(out, jsonl if suffix in (".jsonl", ".ndjson") else parquet)
    return count[0]
