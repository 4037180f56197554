"""Read and write safetensors files one tensor at a time, without loading whole checkpoints.

The safetensors layout is: 8 bytes (little-endian u64) giving the header length N, then N bytes
of JSON mapping each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
relative to the end of the header), optionally ``"__metadata__"``, then the raw little-endian data.

Reading uses plain positioned reads (``readinto``) instead of memory mapping, so the only memory a
tensor costs is its own buffer: mapped file pages would count in the process's RSS once touched.
Writing is streamed too: the header of a shard is computed from the planned names, dtypes and
shapes before any data, then each tensor's bytes are appended as it is produced.

Example:
    >>> import torch, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "x.safetensors")
    >>> plan = [TensorInfo("a", "F32", (2,)), TensorInfo("b", "BF16", (1, 2))]
    >>> with ShardWriter(path, plan) as w:
    ...     w.write("a", torch.tensor([1.0, 2.0]))
    ...     w.write("b", torch.tensor([[3.0, 4.0]], dtype=torch.bfloat16))
    >>> infos = read_header(path)
    >>> infos["b"].shape, infos["b"].dtype
    ((1, 2), 'BF16')
    >>> with TensorFile(path) as f:
    ...     f.read("b").tolist()
    [[3.0, 4.0]]
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from prom_reward.errors import ConfigError

from ..config import fits

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
if hasattr(torch, "float8_e4m3fn"):
    DTYPES["F8_E4M3"] = torch.float8_e4m3fn
    DTYPES["F8_E5M2"] = torch.float8_e5m2
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
_ITEMSIZE: dict[torch.dtype, int] = {d: torch.empty((), dtype=d).element_size() for d in DTYPES.values()}
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16"})
_MAX_HEADER = 100_000_000


@dataclass(frozen=True)
class TensorInfo:
    """What a header says about one tensor (no data)."""

    name: str
    """Tensor name, e.g. ``model.layers.0.mlp.up_proj.weight``."""

    dtype: str
    """safetensors dtype code: ``F32``, ``BF16``, ``F16``, ``I64`` ..."""

    shape: tuple[int, ...]
    """Tensor shape."""

    begin: int = 0
    """Byte offset of the data, relative to the end of the header (0 for planned tensors)."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(
                f"tensor {self.name!r}: dtype {self.dtype!r} is not supported; expected one of {', '.join(DTYPES)}"
            )

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes."""
        return self.numel * _ITEMSIZE[DTYPES[self.dtype]]

    @property
    def is_float(self) -> bool:
        """True for floating-point tensors (the ones that get merged)."""
        return self.dtype in FLOAT_DTYPES


def _read_raw_header(path: Path) -> tuple[dict[str, Any], int]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ConfigError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise ConfigError(f"{path}: not a safetensors file (header length {n} is implausible)")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"{path}: not a safetensors file (header is not JSON: {e})") from e
    if not isinstance(header, dict):
        raise ConfigError(f"{path}: not a safetensors file (header is not a JSON object)")
    return header, 8 + n


def read_header(path: str | Path) -> dict[str, TensorInfo]:
    """Names, dtypes, shapes and offsets of the tensors in one safetensors file (reads only the header).

    Raises ConfigError when the file is not a readable safetensors file, or is shorter than its header's
    data offsets say (a truncated download is reported here, before any tensor is read).
    """
    header, data_start = _read_raw_header(Path(path))
    out: dict[str, TensorInfo] = {}
    spans: list[tuple[int, int, str]] = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = meta["data_offsets"]
            shape = meta["shape"]
            if not all(fits(x, int) and x >= 0 for x in (begin, end, *shape)) or begin > end:
                raise ValueError(f"shape {shape!r} and data_offsets {[begin, end]!r} must be ints >= 0, begin <= end")
            info = TensorInfo(name, meta["dtype"], tuple(shape), begin)
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"{path}: malformed header entry for {name!r}: {e}; fetch the file again") from e
        if end - begin != info.nbytes:
            raise ConfigError(
                f"{path}: tensor {name!r} claims {end - begin} bytes, its dtype and shape need {info.nbytes}"
            )
        out[name] = info
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, name), (begin, _, other) in itertools.pairwise(spans):
        if begin < end:  # safetensors itself refuses such a file: two tensors would read the same bytes
            raise ConfigError(
                f"{path}: the header lies: tensors {name!r} and {other!r} share bytes ({other!r} starts at "
                f"{begin}, before {name!r} ends at {end}); fetch the file again"
            )
    data_end = max((end for _, end, _ in spans), default=0)
    size = Path(path).stat().st_size
    if size < data_start + data_end:
        raise ConfigError(
            f"{path}: truncated: the header's data offsets need {data_start + data_end} bytes, the "
            f"file has {size} ({data_start + data_end - size} missing; an interrupted download or "
            "copy?); fetch the file again"
        )
    return out


class TensorFile:
    """An open safetensors file from which single tensors are read with positioned reads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.infos = read_header(self.path)
        _, self._data_start = _read_raw_header(self.path)
        self._f = open(self.path, "rb", buffering=0)
        self._fd = self._f.fileno()

    def read(self, name: str) -> torch.Tensor:
        """The tensor ``name`` as a fresh CPU tensor of its stored dtype."""
        info = self.infos[name]
        return self.read_range(name, 0, info.numel).reshape(info.shape)

    def read_range(self, name: str, start: int, count: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Flat elements ``start`` to ``start + count`` of tensor ``name`` (stored dtype), read straight
        into the returned tensor's memory with positioned reads (into ``out``, a contiguous tensor of
        ``count`` elements of the stored dtype, when given: a reused buffer)."""
        info = self.infos[name]
        dtype = DTYPES[info.dtype]
        size = _ITEMSIZE[dtype]
        if out is None:
            out = torch.empty(count, dtype=dtype)
        elif out.dtype != dtype or out.numel() != count or not out.is_contiguous():
            raise ValueError(f"read_range: out must be {count} contiguous {dtype}, got {out.numel()} {out.dtype}")
        nbytes = count * size
        if nbytes:
            view = out.view(torch.uint8).numpy().data
            pos = self._data_start + info.begin + start * size
            got = 0
            while got < nbytes:
                n = os.preadv(self._fd, [view[got:]], pos + got)
                if not n:
                    raise ConfigError(f"{self.path}: file ends inside tensor {name!r} (truncated download?)")
                got += n
        return out

    def close(self) -> None:
        """Close the file handle."""
        self._f.close()

    def __enter__(self) -> TensorFile:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class ShardWriter:
    """Writes one safetensors file whose tensors (names, dtypes, shapes, order) are known in advance.

    The header is written on open; ``write`` must then be called once per planned tensor, in order.
    """

    def __init__(self, path: str | Path, plan: Iterable[TensorInfo], metadata: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.plan = list(plan)
        header: dict[str, Any] = {"__metadata__": dict(metadata or {"format": "pt"})}
        offset = 0
        for info in self.plan:
            header[info.name] = {
                "dtype": info.dtype,
                "shape": list(info.shape),
                "data_offsets": [offset, offset + info.nbytes],
            }
            offset += info.nbytes
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # data starts 8-byte aligned
        self._f = open(self.path, "wb")
        self._f.write(struct.pack("<Q", len(raw)) + raw)
        self._pool: ThreadPoolExecutor | None = None
        self._next = 0

    def write(self, name: str, tensor: torch.Tensor) -> None:
        """Append ``tensor`` (must be the next planned name, with its dtype and shape)."""
        info = self.plan[self._next] if self._next < len(self.plan) else None
        if info is not None and info.name == name and tuple(tensor.shape) != info.shape:  # the rest: write_parts
            raise RuntimeError(f"{self.path}: tensor {name!r} is {tuple(tensor.shape)}, the plan says {info.shape}")
        self.write_parts(name, [tensor.detach().contiguous().reshape(-1)])

    def write_parts(self, name: str, parts: Iterable[torch.Tensor], background: bool = False) -> None:
        """Append the next planned tensor as consecutive flat pieces (each of the planned dtype),
        so a tensor can be produced and written a chunk at a time.

        ``background``: each piece is written on a worker thread while the next one is produced (the
        file write releases the GIL); a piece must then stay unchanged until the one after it has been
        produced (``stream.merge_tensor``'s pieces do). Everything is written when this returns."""
        if self._next >= len(self.plan) or self.plan[self._next].name != name:
            expected = repr(self.plan[self._next].name) if self._next < len(self.plan) else "nothing (shard is full)"
            raise RuntimeError(f"{self.path}: wrote {name!r}, the plan expects {expected}")
        info = self.plan[self._next]
        if background and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-writer")
        written = 0
        pending: Future | None = None
        try:
            for part in parts:  # with background: the next part is produced while this one is written
                if DTYPE_NAMES.get(part.dtype) != info.dtype:
                    raise RuntimeError(f"{self.path}: tensor {name!r} is {part.dtype}, the plan says {info.dtype}")
                flat = part.contiguous().reshape(-1)
                if flat.numel():
                    if pending is not None:  # the part before is written: its buffer may be reused from now on
                        pending.result()
                        pending = None
                    if background and self._pool is not None:
                        pending = self._pool.submit(self._write_bytes, flat)
                    else:
                        self._write_bytes(flat)
                written += flat.numel()
        finally:
            if pending is not None:
                pending.result()
        if written != info.numel:
            raise RuntimeError(f"{self.path}: tensor {name!r} got {written} elements, the plan says {info.numel}")
        self._next += 1

    def _write_bytes(self, flat: torch.Tensor) -> None:
        self._f.write(flat.view(torch.uint8).numpy().data)

    def close(self) -> None:
        """Close the file; raises if planned tensors were not written."""
        self._stop_pool()
        self._f.close()
        if self._next != len(self.plan):
            raise RuntimeError(f"{self.path}: {len(self.plan) - self._next} planned tensors were not written")

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
        else:
            self._stop_pool()
            self._f.close()

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
