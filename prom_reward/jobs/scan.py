"""The check of a job's whole input before anything is judged or written: one streaming pass that checks every
row, counts and hashes each file, notes where batches may start, and settles Parquet column types."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prom_reward.errors import InputError
from prom_reward.format.templates import unicode_problem
from prom_reward.jobs.source import SourceRow, file_kind, filesystem, iter_file
from prom_reward.jobs.spec import JobKind


@dataclass
class Scan:
    """What the pass found."""

    inputs: list[dict[str, Any]] = field(default_factory=list)
    """Per file: ``path``, ``size``, ``rows``, ``sha256`` (what the manifest records)."""
    files: list[tuple[str, int, int]] = field(default_factory=list)
    """Per file: (path, id of its first row, id after its last row)."""
    rows: int = 0
    """Rows the job judges (groups, for pairs' long layout)."""
    firsts: list[int] = field(default_factory=list)
    """Pairs' long layout: the input position of each group's first row; empty otherwise."""
    lines: int = 0
    """Input rows."""
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
    """JSON-lines rows where a batch may start: id -> (byte offset, line)."""
    schema: Any = None
    """The Parquet output's schema."""

    def span(self, a: int, b: int) -> tuple[int, int]:
        """The input rows (``source_index`` from, to) of the job's rows ``a`` to ``b`` (past the last)."""
        if not self.firsts:
            return a, b
        n = len(self.firsts)
        return (self.firsts[a] if a < n else self.lines), (self.firsts[b] if b < n else self.lines)


class _Schema:
    """The types of the input columns, settled over blocks of rows (every row's columns, not the first's alone)."""

    def __init__(self, kind: JobKind) -> None:
        self.kind, self.schema = kind, None
        self.block: list[SourceRow] = []
        self.skip = {"source_index", *kind.result_types}

    def add(self, row: SourceRow) -> None:
        self.block.append(row)
        if len(self.block) == 1024:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if not self.block:
            return
        names = [k for k in dict.fromkeys(k for r in self.block for k in r.data) if k not in self.skip]
        where = f"{self.block[0].where} .. {self.block[-1].where}"
        fields = []
        for name in names:
            values = [r.data.get(name) for r in self.block]
            try:
                fields.append(pa.field(name, pa.array(values).type))
            except UnicodeEncodeError as e:
                dumped = [json.dumps(v, ensure_ascii=False, default=str) for v in values]
                at = next(r for r, text in zip(self.block, dumped, strict=True) if unicode_problem(text))
                raise InputError(
                    f"{at.where}: row {at.id}: column {name!r} holds a lone surrogate ({e.object[e.start : e.end]!r}), "
                    "which a Parquet output cannot hold; fix: write a .jsonl output (it keeps the value as the input "
                    "has it), or repair the text"
                ) from None
            except OverflowError as e:  # an integer beyond int64
                raise InputError(
                    f"{where}: column {name!r} holds an integer a Parquet column cannot hold ({e}); fix: write a "
                    ".jsonl output, or give the column as text"
                ) from None
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                raise _two_kinds(where, f"column {name!r}", e) from None
        try:
            schema = pa.schema(fields)
            self.schema = (
                schema if self.schema is None else pa.unify_schemas([self.schema, schema], promote_options="permissive")
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise _two_kinds(f"the input up to {self.block[-1].where}", "a column", e) from None
        self.block = []

    def result(self) -> Any:
        import pyarrow as pa

        self.flush()
        inputs = [
            pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f for f in self.schema or pa.schema([])
        ]
        schema = pa.schema([pa.field("source_index", pa.int64()), *inputs, *self.kind.result_schema()])
        _readable(schema)
        return schema


def _readable(schema: Any) -> None:
    """``InputError`` for a schema Parquet can write but not read back (a column nested too deeply)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    def problem(s: Any) -> Exception | None:
        buf = io.BytesIO()
        try:
            pq.write_table(s.empty_table(), buf)
            pq.read_table(pa.BufferReader(buf.getvalue()))
        except (pa.ArrowException, OSError) as e:
            return e
        return None

    if (whole := problem(schema)) is None:
        return
    for f in schema:
        if (e := problem(pa.schema([f]))) is not None:
            raise InputError(
                f"column {f.name!r} cannot go to a Parquet output ({e}); fix: write a .jsonl output, or give the "
                "column as text"
            )
    raise InputError(f"the input's columns cannot go to a Parquet output ({whole}); fix: write a .jsonl output")


def _two_kinds(where: str, column: str, e: Exception) -> InputError:
    return InputError(
        f"{where}: {column} holds values of two kinds ({e}); a Parquet output needs one type per column; fix: give "
        "the column one type, or write a .jsonl output"
    )


def scan_input(
    kind: JobKind, files: list[str], batch_size: int, starts: frozenset[int] = frozenset(), want_schema: bool = False
) -> Scan:
    """Check, count and hash every row of ``files``; ``starts``: ids where a batch may start besides the multiples
    of ``batch_size`` (where an earlier run's batches ended)."""
    out = Scan()
    prepare = kind.preparer()
    schema = _Schema(kind) if want_schema else None

    def note(i: int, offset: int, line: int) -> None:
        if i % batch_size == 0 or i in starts:
            out.offsets[i] = (offset, line)

    def rows() -> Iterator[SourceRow]:
        base = 0
        for path in files:
            fs, inner = filesystem(path)
            h = hashlib.sha256()
            binary = file_kind(path) in ("parquet", "arrow")  # read by record batches: hashed from the file
            nxt = yield from iter_file(path, base, on_bytes=None if binary else h.update, on_offset=note)
            if binary:
                with fs.open_input_stream(inner) as f:
                    h = hashlib.file_digest(f, "sha256")
            size = int(fs.get_file_info(inner).size or 0)
            out.inputs.append({"path": path, "size": size, "rows": nxt - base, "sha256": h.hexdigest()})
            out.files.append((path, base, nxt))
            base = nxt

    for row in kind.group(rows()):
        prepare(row)
        if schema is not None:
            schema.add(row)
        if kind.regroups:
            out.firsts.append(row.source_index)
        out.rows += 1
        out.lines += row.size
    if schema is not None:
        out.schema = schema.result()
    return out
