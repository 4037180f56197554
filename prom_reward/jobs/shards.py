"""Input shards and output part files for judging on Ray (``prom_reward.jobs.ray_run``).

Every input row gets a stable id: its position in the input (files in the order given, rows in
file order). The input is cut into shards of consecutive ids, ``[start, stop)``; a shard is read
by the actor that judges it (Parquet through its row groups, JSON lines from a byte offset found
by one streaming pass on the driver), so the driver never holds the rows. Each judged shard is
written as one part file, ``part-{start:012d}-{stop:012d}.parquet`` (or ``.jsonl``), to a
temporary name first and then renamed: a part is there whole or not at all, and a retried shard
replaces its part instead of adding rows. Resuming skips the shards whose part exists, except the
parts written after the judge backend failed (``write_part(..., failed=REASON)``: an unreachable
server, ...): a marker ``_failed-{part name}`` next to such a part (written before the part, removed
after a good part replaced it) makes ``failed_parts`` list it, and a resume judges it again.

Paths may be local or any URI pyarrow reads (``s3://``, ``gs://``, ``hdfs://``) or, failing that,
fsspec; the output folder must be a filesystem every node can write (local for one machine, a
shared mount for a cluster).

Example:
    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp(); src = os.path.join(d, "in.jsonl")
    >>> _ = open(src, "w").write("".join(json.dumps({"i": i}) + "\\n" for i in range(5)))
    >>> shards = list(plan_shards([src], 2))
    >>> [(s["start"], s["stop"]) for s in shards], [r["i"] for r in read_shard(shards[1])]
    ([(0, 2), (2, 4), (4, 5)], [2, 3])
    >>> _ = write_part(d, 2, 4, [{"i": 2}, {"i": 3}], "jsonl"); sorted(done_parts(d))
    [(2, 4)]
    >>> _ = write_part(d, 0, 2, [{"i": 0}, {"i": 1}], "jsonl", failed="backend failed: down")
    >>> sorted(done_parts(d)), sorted(failed_parts(d))
    ([(0, 2), (2, 4)], [(0, 2)])
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from prom_reward.errors import ConfigError, InputError
from prom_reward.jobs.io import RowWriter, _kind

_PART = re.compile(r"^part-(\d{12})-(\d{12})\.(parquet|jsonl)$")
FAILED_PREFIX = "_failed-"
"""A part ``P`` whose rows the backend failed to judge has a marker ``_failed-P`` beside it (the leading
underscore keeps pyarrow.dataset and Ray from reading it as data)."""


def _filesystem(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) for a local path or a URI."""
    import pyarrow.fs as pafs

    if "://" not in path:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    try:
        return pafs.FileSystem.from_uri(path)
    except (pafs.ArrowInvalid, ValueError, OSError):  # a protocol only fsspec knows
        import fsspec

        fs, inner = fsspec.core.url_to_fs(path)
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), inner


def expand_inputs(inputs: "str | Path | Sequence[str | Path]") -> list[str]:
    """The input files: each path as given (made absolute), a folder's .jsonl/.parquet files sorted."""
    import pyarrow.fs as pafs

    out: list[str] = []
    for p in [inputs] if isinstance(inputs, (str, Path)) else inputs:
        p = str(p)
        fs, inner = _filesystem(p)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise ConfigError(f"{p}: no such file or folder (expected a .jsonl/.parquet file or a folder of them)")
        prefix = p[: len(p) - len(inner)] if "://" in p and p.endswith(inner) else ("" if "://" not in p else None)
        if info.type == pafs.FileType.Directory:
            if prefix is None:
                raise ConfigError(f"{p}: give the files of this remote folder one by one")
            files = sorted(f.path for f in fs.get_file_info(pafs.FileSelector(inner))
                           if f.type == pafs.FileType.File and Path(f.path).suffix.lower() in (".jsonl", ".parquet"))
            if not files:
                raise ConfigError(f"{p}: a folder without .jsonl or .parquet files")
            out += [prefix + f for f in files]
        else:
            out.append(p if "://" in p else inner)
    return out


def plan_shards(files: Sequence[str], rows_per_shard: int) -> Iterator[dict[str, Any]]:
    """Shards ``{"path", "kind", "start", "stop", "file_row", "offset"}`` over the files, in id order."""
    if rows_per_shard < 1:
        raise ConfigError(f"rows_per_shard must be >= 1, got {rows_per_shard}")
    base = 0
    for path in files:
        kind = _kind(path)
        fs, inner = _filesystem(path)
        if kind == "json":
            raise ConfigError(f"{path}: a JSON array cannot be split into shards; convert it to .jsonl")
        if kind == "parquet":
            import pyarrow.parquet as pq

            with fs.open_input_file(inner) as f:
                n = pq.ParquetFile(f).metadata.num_rows
            for a in range(0, n, rows_per_shard):
                b = min(n, a + rows_per_shard)
                yield dict(path=path, kind=kind, start=base + a, stop=base + b, file_row=a, offset=0)
            base += n
            continue
        n, offset, shard_offset = 0, 0, 0
        with fs.open_input_stream(inner) as f:
            for line in _lines(f):
                if line.strip():
                    if n % rows_per_shard == 0:
                        if n:
                            yield dict(path=path, kind=kind, start=base + n - rows_per_shard, stop=base + n,
                                       file_row=n - rows_per_shard, offset=shard_offset)
                        shard_offset = offset
                    n += 1
                offset += len(line)
        if n:
            a = (n - 1) // rows_per_shard * rows_per_shard
            yield dict(path=path, kind=kind, start=base + a, stop=base + n, file_row=a, offset=shard_offset)
        base += n


def _lines(f: Any, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Lines of a binary stream (with their newline), read a megabyte at a time."""
    rest = b""
    while data := f.read(chunk):
        parts = (rest + data).split(b"\n")
        rest = parts.pop()
        for p in parts:
            yield p + b"\n"
    if rest:
        yield rest


def read_shard(shard: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one shard (from ``plan_shards``)."""
    import json

    n = int(shard["stop"]) - int(shard["start"])
    fs, inner = _filesystem(str(shard["path"]))
    if shard["kind"] == "parquet":
        import pyarrow.parquet as pq

        with fs.open_input_file(inner) as f:
            pf = pq.ParquetFile(f)
            lo, hi, groups, seen, first = int(shard["file_row"]), int(shard["file_row"]) + n, [], 0, 0
            for g in range(pf.metadata.num_row_groups):
                size = pf.metadata.row_group(g).num_rows
                if seen + size > lo and seen < hi:
                    first = seen if not groups else first
                    groups.append(g)
                seen += size
            start = lo - first
            return pf.read_row_groups(groups).slice(start, n).to_pylist()
    rows: list[dict[str, Any]] = []
    with fs.open_input_file(inner) as f:
        f.seek(int(shard["offset"]))
        for line in _lines(f):
            if len(rows) == n:
                break
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{shard['path']}: row {int(shard['file_row']) + len(rows)} is not valid "
                                     f"JSON ({e.msg}); fix or remove that line") from e
    return rows


def part_name(start: int, stop: int, fmt: str) -> str:
    """``part-{start:012d}-{stop:012d}.{fmt}``."""
    return f"part-{start:012d}-{stop:012d}.{fmt}"


def write_part(folder: str | Path, start: int, stop: int, rows: list[dict[str, Any]], fmt: str,
               failed: str | None = None) -> Path:
    """Write one shard's rows atomically (temporary name, then rename) and return the part's path.

    ``failed``: why the judge backend failed for this shard (its rows hold no judgment); the part then
    gets a ``_failed-`` marker, written before the part, so a resume judges it again. A part written
    without ``failed`` removes an earlier marker after it is in place. Either way a process killed at
    any point leaves no part, or a whole part that is at worst judged once more."""
    final = Path(folder) / part_name(start, stop, fmt)
    marker = final.with_name(FAILED_PREFIX + final.name)
    tmp = Path(folder) / f"_tmp-{os.getpid()}-{final.name}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    if failed is not None:
        _write_atomic(marker, failed.encode())
    if fmt == "jsonl":
        tmp.touch()
    with RowWriter(tmp) as w:
        w.write(rows)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    if failed is None and marker.exists():
        marker.unlink(missing_ok=True)
    return final


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"_tmp-{os.getpid()}-{path.name}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def done_parts(folder: str | Path) -> dict[tuple[int, int], Path]:
    """The part files present in an output folder, by ``(start, stop)`` (backend-failed ones included)."""
    p = Path(folder)
    if not p.is_dir():
        return {}
    return {(int(m[1]), int(m[2])): p / name for name in os.listdir(p) if (m := _PART.match(name))}


def failed_parts(folder: str | Path) -> dict[tuple[int, int], Path]:
    """The parts of ``done_parts`` written after the judge backend failed (a ``_failed-`` marker beside
    them): to judge again on resume. A marker whose part is missing names a shard that is to do anyway."""
    p = Path(folder)
    if not p.is_dir():
        return {}
    names = set(os.listdir(p))
    return {(int(m[1]), int(m[2])): p / name for name in names
            if (m := _PART.match(name)) and FAILED_PREFIX + name in names}


def merge_parts(folder: str | Path, output: str | Path) -> int:
    """Concatenate the part files in id order into one .jsonl/.parquet file (written then renamed)."""
    from prom_reward.jobs.io import read_rows

    out = Path(output)
    tmp = out.with_name(f"_tmp-{os.getpid()}-{out.name}")
    n = 0
    with RowWriter(tmp) as w:
        for _, path in sorted(done_parts(folder).items()):
            rows = list(read_rows(path))
            w.write(rows)
            n += len(rows)
    if not tmp.exists():
        tmp.touch()
    os.replace(tmp, out)
    return n
