"""Run a merge: stream tensor by tensor from the inputs into sharded safetensors output.

For each output tensor (in the reference model's order) ``stream.merge_tensor`` reads it from the
base and from each model (a LoRA expert computes its delta from its A and B), converts to float32,
lets the method merge it, casts back to the output dtype (the reference model's by default), and
the engine appends the pieces to the current shard. Element-wise methods go a chunk of rows at a
time; TIES and SLERP hold one tensor per input plus a few temporaries; never whole models.
Non-float tensors are copied from the reference model.

Output: ``model.safetensors``, or ``model-0000i-of-0000n.safetensors`` + ``model.safetensors.index.json``;
the reference folder's other files (config.json, generation_config.json, tokenizer files, chat
template ...) and a ``merge_config.yaml`` recording the merge. Resumable: finished shards are
recorded in ``.merge_progress.json`` with a fingerprint of the config and the inputs' headers; running
the same merge again skips them (a different merge into the same folder is refused).

Example (two 2-tensor models averaged; see tests/train_judge/merge/test_methods.py for more)::

    report = run_merge(MergeConfig(method="linear", models=(ModelEntry("a"), ModelEntry("b")), output="out"))
    report.tensors, report.shards   # -> (2, 1)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from prom_reward.errors import ConfigError, OutputError

from .chunking import BUFFERS
from .config import MergeConfig
from .plan import Plan, make_plan, shard_names
from .safetensors_io import ShardWriter, TensorInfo, read_header
from .sources import INDEX, LoraAdapter
from .stream import merge_tensor

log = logging.getLogger(__name__)
PROGRESS = ".merge_progress.json"
RECORD = "merge_config.yaml"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf")
_SKIP_FILES = {INDEX, "pytorch_model.bin.index.json", RECORD, PROGRESS}


try:  # glibc only; elsewhere both are no-ops
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim: Any = _libc.malloc_trim
    _mallopt: Any = _libc.mallopt
except (OSError, AttributeError):
    _trim = _mallopt = None


def _malloc_trim() -> None:
    """Hand freed heap memory back to the OS (glibc); without it, fragmentation lets RSS creep upwards."""
    if _trim is not None:
        _trim(0)


def _keep_chunk_buffers() -> None:
    """Let freed chunk-sized buffers be reused instead of unmapped (each fresh mmap costs ~1000 page
    faults per 4 MB, more than the arithmetic on it); tensor-sized buffers are still mapped and freed."""
    if _mallopt is not None:
        _mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: chunk-sized buffers come from the heap ...
        _mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD: ... and stay there between chunks


@dataclass(frozen=True)
class MergeReport:
    """What a merge wrote."""

    output: str
    """The output folder."""
    method: str
    """The merge method."""
    tensors: int
    """Tensors written (all shards)."""
    shards: int
    """Output shards."""
    total_bytes: int
    """Bytes of tensor data in the output."""
    resumed_shards: int
    """Shards found finished from an earlier run and skipped."""
    seconds: float
    """Wall time of this run."""


def _fingerprint(plan: Plan) -> str:
    h = hashlib.sha256(json.dumps(plan.config.to_dict(), sort_keys=True, default=str).encode())
    for src in [plan.base, *plan.models]:
        if src is None:
            continue
        files = [src.file] if isinstance(src, LoraAdapter) else sorted(set(src.files.values()))
        for f in files:
            st = os.stat(f)
            h.update(f"{Path(f).resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _prepare_output(plan: Plan, fingerprint: str, overwrite: bool) -> set[str]:
    out = Path(plan.config.output)
    prog = out / PROGRESS
    if (
        out.is_dir()
        and any(out.iterdir())
        and all(f.name.endswith(".partial") or f.name.startswith(PROGRESS) for f in out.iterdir())
    ):
        # only an unfinished shard (a merge stopped during its first shard, before any progress was
        # recorded): nothing finished to keep, so start afresh
        shutil.rmtree(out)
    if out.is_dir() and any(out.iterdir()):
        try:
            state = json.loads(prog.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none, or cut by a kill
            state = None
        if state and state.get("fingerprint") == fingerprint and not overwrite:
            return set(state.get("done", []))
        if overwrite and (prog.is_file() or (out / RECORD).is_file()):
            shutil.rmtree(out)
        elif state:
            raise ConfigError(
                f"output: {out} holds a different merge (other config or inputs); choose another "
                "folder, or pass overwrite=True (--overwrite) to replace it"
            )
        else:
            raise ConfigError(
                f"output: {out} exists and is not empty (and was not written by a merge); choose a new or empty folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    _save_progress(out, fingerprint, set())  # from now on the folder is recognisably this merge's
    return set()


def _save_progress(out: Path, fingerprint: str, done: set[str], complete: bool = False) -> None:
    tmp = out / (PROGRESS + ".tmp")
    tmp.write_text(
        json.dumps({"fingerprint": fingerprint, "done": sorted(done), "complete": complete}), encoding="utf-8"
    )
    os.replace(tmp, out / PROGRESS)


def _copy_aux_files(plan: Plan, out: Path) -> list[str]:
    src = plan.reference.path
    if not src.is_dir():
        return []
    copied = []
    for f in sorted(src.iterdir()):
        if not f.is_file() or f.name.startswith(".") or f.name in _SKIP_FILES or f.name.endswith(_WEIGHT_SUFFIXES):
            continue
        shutil.copyfile(f, out / f.name)
        copied.append(f.name)
    cfg_file = out / "config.json"
    if plan.config.dtype and cfg_file.is_file():
        data = json.loads(cfg_file.read_text(encoding="utf-8"))
        for key in ("torch_dtype", "dtype"):
            if key in data:
                data[key] = plan.config.dtype
        cfg_file.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return copied


def run_merge(config: MergeConfig, *, overwrite: bool = False, threads: int | None = None) -> MergeReport:
    """Check ``config`` against the inputs' headers, then merge, streaming, into ``config.output``.

    ``threads``: torch intra-op threads during the merge (default 1, or ``PROM_MERGE_THREADS``): the
    element-wise work runs on cache-sized chunks, where more threads gain little and, on a shared or
    oversubscribed machine, OpenMP's waiting makes each operation many times slower.
    Raises ConfigError (listing every problem) before reading any tensor data when something does not fit.
    """
    if os.environ.get("PROM_MERGE_KERNELS"):  # the choice between two paths is gone: said, not ignored
        raise ConfigError(
            f"PROM_MERGE_KERNELS: expected it unset (the merge has one path, the numba kernels), got "
            f"{os.environ['PROM_MERGE_KERNELS']!r}; unset it"
        )
    n_threads = _threads(threads)
    _keep_chunk_buffers()
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        return _run(config, overwrite)
    except OSError as e:  # full disk, a read-only folder, an input gone: said with the path, never a traceback
        raise OutputError(
            f"output: the merge into {config.output} stopped: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename else ''}; fix: free disk space or choose a writable output "
            "folder (and keep the inputs in place), then run the same command again: finished shards are kept"
        ) from e
    finally:
        BUFFERS.clear()
        torch.set_num_threads(previous)


def _finished(path: Path, shard: list[TensorInfo]) -> bool:
    """A shard recorded as done is kept when its header has the planned tensors and the file is whole
    (a shard cut or replaced since, e.g. by a copy or a crash of the machine, is written again)."""
    if not path.is_file():
        return False
    try:
        infos = read_header(path)
    except ConfigError as e:
        log.warning("writing %s again: %s", path.name, e)
        return False
    if {n: (i.dtype, i.shape) for n, i in infos.items()} != {i.name: (i.dtype, i.shape) for i in shard}:
        log.warning("writing %s again: its tensors are not the planned ones", path.name)
        return False
    return True


def _threads(threads: int | None) -> int:
    """The torch thread count: ``threads``, else ``PROM_MERGE_THREADS``, else 1; a positive int."""
    raw: object = threads if threads is not None else os.environ.get("PROM_MERGE_THREADS", "1")
    where = "threads (--threads)" if threads is not None else "PROM_MERGE_THREADS"
    try:
        n = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        n = 0
    if isinstance(raw, bool) or isinstance(raw, float) or n < 1:
        raise ConfigError(f"{where}: expected a positive int, got {raw!r}; fix: give 1 or more, or leave it unset")
    return n


def _run(config: MergeConfig, overwrite: bool) -> MergeReport:
    start = time.monotonic()
    plan = make_plan(config)
    try:
        fingerprint = _fingerprint(plan)
        done = _prepare_output(plan, fingerprint, overwrite)
        out = Path(config.output)
        names = shard_names(len(plan.shards))
        resumed = 0
        for fname, shard in zip(names, plan.shards, strict=True):
            if fname in done and _finished(out / fname, shard):
                resumed += 1
                continue
            part = out / (fname + ".partial")
            with ShardWriter(part, shard) as writer:
                for info in shard:
                    writer.write_parts(info.name, merge_tensor(plan, info), background=True)
                    _malloc_trim()
            os.replace(part, out / fname)
            done.add(fname)
            _save_progress(out, fingerprint, done)
            log.info("wrote %s (%d tensors)", fname, len(shard))
        total = sum(i.nbytes for i in plan.outputs)
        if len(names) > 1:
            weight_map = {i.name: f for f, shard in zip(names, plan.shards, strict=True) for i in shard}
            index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
            (out / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        _copy_aux_files(plan, out)
        (out / RECORD).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
        _save_progress(out, fingerprint, done, complete=True)
    finally:
        plan.close()
    return MergeReport(
        output=str(out),
        method=config.method,
        tensors=len(plan.outputs),
        shards=len(names),
        total_bytes=total,
        resumed_shards=resumed,
        seconds=time.monotonic() - start,
    )
