"""The input of a job: files (JSON lines, JSON, Parquet, Arrow; local or fsspec; folders and saved ``datasets``)
and their rows with a stable id (``SourceRow``: which of its columns holds each thing a ``grade`` or ``compare`` job
reads, its item, its errors naming the row, the column and the option), streamed; an unreadable file or line is an
``InputError``."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.columns import column_text, find_column
from prom_reward.format.rubrics import Rubric, RubricResolver

T = TypeVar("T")
ITEM_PREFIX = re.compile(r"^item \d+: ")

KINDS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
"""The input files' suffixes and their kinds."""
INPUTS = "a .jsonl, .json, .parquet or .arrow file, or a folder of them (or of datasets' save_to_disk)"


@dataclass(frozen=True)
class SourceRow:
    """One input row with its identity."""

    id: int
    """Position in the whole input (0-based): what the job's batches count."""
    where: str
    """Where it is, for messages: ``FILE:LINE`` (JSON lines) or ``FILE row N``."""
    data: dict[str, Any]
    """The row."""
    first: int | None = None
    """A long-layout group: the position of its first input row; None: ``id``."""
    size: int = 1
    """How many input rows it stands for."""

    @property
    def source_index(self) -> int:
        """The position in the input of (the first of) its rows: ``source_index`` of its outputs."""
        return self.id if self.first is None else self.first

    def error(self, column: str, option: str | None, detail: str) -> InputError:
        """``InputError`` for this row: where it is, the row id, the column, the fix."""
        detail = ITEM_PREFIX.sub("", detail)
        what, _, how = detail.partition("; fix: ") if "; fix: " in detail else detail.partition("; ")
        fixes = [h for h in (how, f"name the right column with {{{option}}}" if option else "") if h]
        fix = f"; fix: {', or '.join(fixes)}" if fixes else ""
        return InputError(
            f"{self.where}: row {self.id}: column {column!r}: {what}{fix}",
            index=self.id,
            field=column,
            mentions=(option,) if option else (),
        )

    def column(self, given: str | None, option: str, *, required: bool = True) -> str | None:
        """The column that holds ``option``'s role; None only for an optional column the row does not have."""
        return find_column(self.data, option, given, f"{self.where}: row {self.id}", required=required, index=self.id)

    def rubric(self, rubrics: RubricResolver, given: str) -> Rubric:
        """The row's rubric (its ``rubric_column`` ``given``, else the job's), errors naming the row's place."""
        name = self.column(given, "rubric_column", required=False)
        try:
            return rubrics(None if name is None else self.data[name], index=self.id, field=name or given)
        except InputError as e:
            raise e.at(self.where) from None

    def columns(self, kind: Any, options: tuple[str, ...]) -> dict[str, str | None]:
        """The column read for each of ``options`` of the job ``kind``, and its optional reference column."""
        names: dict[str, str | None] = {o: self.column(getattr(kind, o), o) for o in options}
        names["reference_column"] = self.column(kind.reference_column, "reference_column", required=False)
        return names

    def item(self, names: dict[str, str | None], build: Callable[..., T], rubric: Rubric) -> T:
        """The row's item: ``build(*texts, rubric, reference)`` from the columns ``names``; the item's own check
        fails as an ``InputError`` naming the row, the column and the option."""
        options = [o for o in names if o != "reference_column"]
        where = f"{self.where}: row {self.id}"  # a message list is made text; its errors name the row already
        texts = [column_text(self.data, str(names[o]), o, where, index=self.id) for o in options]
        reference = names["reference_column"]
        try:
            return build(*texts, rubric, None if reference is None else self.data[reference])
        except InputError as e:
            option = "reference_column" if e.field == "reference_answer" else f"{e.field}_column"
            option = option if option in names else "instruction_column"
            raise self.error(str(names[option] or e.field), option, str(e)) from None


def file_kind(path: str | Path) -> str:
    """``jsonl``, ``json``, ``parquet`` or ``arrow`` from the file name; ``ConfigError`` for anything else."""
    suffix = Path(str(path)).suffix.lower()
    if suffix in KINDS:
        return KINDS[suffix]
    raise ConfigError(f"{path}: unsupported file type {suffix or '(no suffix)'!r}; fix: give {INPUTS}")


def filesystem(path: str) -> tuple[Any, str]:
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


def _saved_dataset(fs: Any, folder: str, given: str) -> list[str] | None:
    """The data files of a ``save_to_disk`` folder in order (None: not one); a ``DatasetDict``'s is an error."""
    import pyarrow.fs as pafs

    def read(name: str) -> Any:
        path = f"{folder.rstrip('/')}/{name}"
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with fs.open_input_stream(path) as f:
            try:
                return json.loads(f.read().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InputError(f"{given}: {name} is not JSON ({e}); fix: save the dataset again") from None

    state = read("state.json")
    if isinstance(state, dict) and isinstance(state.get("_data_files"), list):
        return [f"{folder.rstrip('/')}/{d['filename']}" for d in state["_data_files"]]
    splits = read("dataset_dict.json")
    if isinstance(splits, dict):
        names = splits.get("splits") or []
        raise InputError(
            f"{given}: a DatasetDict saved with save_to_disk (splits: {', '.join(map(str, names))}); fix: give one "
            f"split's folder, e.g. {given.rstrip('/')}/{names[0] if names else 'train'}"
        )
    return None


def expand_inputs(inputs: str | Path | Sequence[str | Path]) -> list[str]:
    """The input files: each path as given (local ones absolute), a folder's data files sorted (or in a
    ``save_to_disk`` folder's order)."""
    import pyarrow.fs as pafs

    out: list[str] = []
    for given in [inputs] if isinstance(inputs, (str, Path)) else inputs:
        p = str(given)
        fs, inner = filesystem(p)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise InputError(f"{p}: no such file or folder; fix: check the path (expected {INPUTS})")
        prefix = p[: len(p) - len(inner)] if "://" in p and p.endswith(inner) else ("" if "://" not in p else None)
        if info.type == pafs.FileType.Directory:
            if prefix is None:
                raise ConfigError(f"{p}: a remote folder; fix: give its files one by one")
            files = _saved_dataset(fs, inner, p) or sorted(
                f.path
                for f in fs.get_file_info(pafs.FileSelector(inner))
                if f.type == pafs.FileType.File
                and KINDS.get(Path(f.path).suffix.lower(), "json") != "json"
                and not f.base_name.startswith(("_", "."))  # as pyarrow.dataset: markers, temporaries, ._x copies
            )
            if not files:
                raise InputError(
                    f"{p}: a folder without .jsonl, .parquet or .arrow files (names starting with _ or . are "
                    f"skipped); fix: give {INPUTS}"
                )
            out += [prefix + f for f in files]
        else:
            file_kind(p)
            out.append(p if "://" in p else inner)
    if not out:
        raise ConfigError(f"no input given; fix: give {INPUTS}")
    return out


def lines(f: Any, on_bytes: Callable[[bytes], None] | None = None, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Lines of a binary stream (with their newline), read a megabyte at a time; ``on_bytes``: every chunk read."""
    rest = b""
    while data := f.read(chunk):
        if on_bytes:
            on_bytes(data)
        parts = (rest + data).split(b"\n")
        rest = parts.pop()
        for p in parts:
            yield p + b"\n"
    if rest:
        yield rest


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    """One JSON-lines row (a UTF-8 byte order mark before it ignored); ``InputError`` naming ``where`` for bytes
    that are not a JSON object."""
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{where}: not UTF-8 text (byte {e.start}: {line[e.start : e.start + 1]!r}; a binary file?); "
            "fix: give a JSON-lines file with one JSON object per line"
        ) from None
    try:
        row = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{where}: not valid JSON ({e.msg} at column {e.colno}); fix: repair or remove that line"
        ) from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read; fix: flatten or remove that line") from None
    if not isinstance(row, dict):
        raise InputError(
            f"{where}: expected a JSON object per line, got {type(row).__name__}; fix: one {{...}} object per line"
        )
    return row


def _parquet(path: str, f: Any) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(f)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(
            f"{path}: not a readable Parquet file ({e}); fix: give an intact .parquet file "
            "(or rename a JSON-lines file to .jsonl)"
        ) from None


def _arrow(path: str, f: Any) -> Any:
    """A reader of the record batches of an Arrow IPC stream (what ``datasets`` writes) or file."""
    import pyarrow as pa

    try:
        r = pa.ipc.open_file(f)
        return (r.get_batch(i) for i in range(r.num_record_batches))
    except (pa.ArrowInvalid, OSError):
        f.seek(0)
    try:
        return pa.ipc.open_stream(f)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file ({e}); fix: give an intact .arrow file") from None


def iter_file(
    path: str,
    first_id: int,
    want: Callable[[int], bool] | None = None,
    on_bytes: Callable[[bytes], None] | None = None,
    on_offset: Callable[[int, int, int], None] | None = None,
) -> Generator[SourceRow, None, int]:
    """The rows of one file, ids from ``first_id``; returns the id after its last row. ``want(id)`` False: counted,
    not yielded; ``on_bytes``: every raw chunk; ``on_offset(id, byte offset, line)`` for each JSON-lines row."""
    kind = file_kind(path)
    fs, inner = filesystem(path)
    try:
        if kind in ("parquet", "arrow"):
            with fs.open_input_file(inner) as f:
                n = first_id
                try:
                    reader = _parquet(path, f).iter_batches(batch_size=1024) if kind == "parquet" else _arrow(path, f)
                    for batch in reader:
                        for i, row in enumerate(batch.to_pylist()):
                            if want is None or want(n + i):
                                yield SourceRow(n + i, f"{path} row {n + i - first_id}", row)
                        n += batch.num_rows
                except OSError as e:
                    raise InputError(
                        f"{path}: damaged {kind.title()} data after row {n - first_id} ({e}); fix: give an intact file"
                    ) from None
            return n
        if kind == "json":
            with fs.open_input_stream(inner) as f:
                data = f.read()
            if on_bytes:
                on_bytes(data)
            if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"[":  # JSON lines named .json (the Prometheus collections)
                return (yield from _json_lines(path, io.BytesIO(data), first_id, want, None, on_offset))
            try:
                rows = json.loads(data.decode("utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                raise InputError(
                    f"{path}: not a JSON array of objects ({e}); fix: give a JSON array, or one object per "
                    "line in a .jsonl file"
                ) from None
            for i, row in enumerate(rows):
                if not isinstance(row, dict):
                    raise InputError(
                        f"{path} row {i}: expected a JSON object, got {type(row).__name__}; fix: one "
                        "{...} object per row"
                    )
                if want is None or want(first_id + i):
                    yield SourceRow(first_id + i, f"{path} row {i}", row)
            return first_id + len(rows)
        with fs.open_input_stream(inner) as f:
            return (yield from _json_lines(path, f, first_id, want, on_bytes, on_offset))
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e}); fix: check the path and its permissions") from None


def _json_lines(
    path: str,
    f: Any,
    first_id: int,
    want: Callable[[int], bool] | None,
    on_bytes: Callable[[bytes], None] | None,
    on_offset: Callable[[int, int, int], None] | None,
    first_line: int = 1,
) -> Generator[SourceRow, None, int]:
    """The rows of the JSON-lines stream ``f`` of ``path`` (``iter_file``'s options); returns the next id."""
    n, offset = first_id, 0
    for lineno, line in enumerate(lines(f, on_bytes), first_line):
        if line.strip():
            if on_offset:
                on_offset(n, offset, lineno)
            if want is None or want(n):
                yield SourceRow(n, f"{path}:{lineno}", parse_line(line, f"{path}:{lineno}"))
            n += 1
        offset += len(line)
    return n


def iter_rows(files: Sequence[str], want: Callable[[int], bool] | None = None) -> Iterator[SourceRow]:
    """The rows of every file in order, with ids running across files."""
    base = 0
    for path in files:
        base = yield from iter_file(path, base, want=want)


def read_range(path: str, first_id: int, start: int, stop: int, offset: int = 0, line: int = 1) -> list[SourceRow]:
    """The rows with ids ``[start, stop)`` of one file whose first row has id ``first_id``; ``offset``/``line``:
    where row ``start`` begins in a JSON-lines file."""
    kind = file_kind(path)
    fs, inner = filesystem(path)
    if kind == "parquet":  # only the row groups that hold the range
        with fs.open_input_file(inner) as f:
            pf = _parquet(path, f)
            lo, hi = start - first_id, stop - first_id
            sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
            begins = [0, *itertools.accumulate(sizes)]  # row group g holds rows begins[g] .. begins[g + 1]
            groups = [g for g in range(len(sizes)) if begins[g + 1] > lo and begins[g] < hi]
            data = pf.read_row_groups(groups).slice(lo - begins[groups[0] if groups else 0], hi - lo).to_pylist()
        return [SourceRow(start + i, f"{path} row {lo + i}", r) for i, r in enumerate(data)]
    if kind != "jsonl":
        return list(iter_file(path, first_id, want=lambda i: start <= i < stop))
    with fs.open_input_file(inner) as f:
        f.seek(offset)
        return list(itertools.islice(_json_lines(path, f, start, None, None, None, line), stop - start))


def read_rows(inputs: str | Path | Sequence[str | Path]) -> Iterator[dict[str, Any]]:
    """The rows of one or more files (or folders) as dicts, streamed."""
    for row in iter_rows(expand_inputs(inputs)):
        yield row.data
