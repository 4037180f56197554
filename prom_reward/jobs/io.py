"""Reading and writing judge job files: JSON lines, JSON arrays and Parquet, streamed.

Rows are read lazily (Parquet in record batches) and written as they are produced,
so a large file never has to fit in memory.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
    >>> with RowWriter(path) as w:
    ...     w.write([{"a": 1}, {"a": 2}])
    >>> [r["a"] for r in read_rows(path)], count_rows(path)
    ([1, 2], 2)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from prom_reward.errors import ConfigError, InputError

_JSONL = (".jsonl", ".ndjson")
_FLOAT_COLUMNS = {"score", "expected_score", "p_a"}
_BOOL_COLUMNS = {"swap_agreement"}  # prom-reward compare: None without swap or where an order failed


def _kind(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in _JSONL:
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise ConfigError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json or .parquet")


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the rows of a .jsonl/.json/.parquet file as dicts."""
    kind = _kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=1024):
            yield from batch.to_pylist()
        return
    if kind == "json":
        data = json.loads(Path(path).read_text())
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON array of objects, got {type(data).__name__}")
        yield from data
        return
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{lineno}: not valid JSON ({e.msg}); fix or remove that line") from e
            if not isinstance(row, dict):
                raise InputError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
            yield row


def count_rows(path: str | Path) -> int:
    """Number of complete rows already in a file (0 if it does not exist)."""
    p = Path(path)
    if not p.exists():
        return 0
    if _kind(p) == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(str(p)).metadata.num_rows)
    if _kind(p) == "json":
        return len(json.loads(p.read_text() or "[]"))
    with open(p, "rb") as f:
        return sum(1 for line in f if line.endswith(b"\n") and line.strip())


class RowWriter:
    """Append rows to .jsonl (flushed per write, resumable) or write a .parquet file."""

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self.kind = _kind(path)
        if self.kind == "json":
            raise ConfigError(f"{path}: write .jsonl or .parquet (a JSON array cannot be streamed)")
        if self.kind == "parquet" and append:
            raise ConfigError(f"{path}: resuming needs a .jsonl output; Parquet files cannot be appended")
        self._file = open(self.path, "a" if append else "w", encoding="utf-8") if self.kind == "jsonl" else None
        self._pq: Any = None

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if self._file is not None:
            self._file.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            self._file.flush()
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in rows]
        if self._pq is None:
            inferred = pa.Table.from_pylist(flat).schema
            # columns that are all None in the first chunk would be typed null: widen them
            self._schema = pa.schema([
                pa.field(f.name, (pa.float64() if f.name in _FLOAT_COLUMNS else pa.bool_() if f.name in _BOOL_COLUMNS
                                  else pa.string()) if pa.types.is_null(f.type) else f.type) for f in inferred
            ])
            self._pq = pq.ParquetWriter(str(self.path), self._schema)
        self._pq.write_table(pa.Table.from_pylist(flat, schema=self._schema))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._pq is not None:
            self._pq.close()
            self._pq = None

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
