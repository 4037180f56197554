"""Merge one output tensor: copied, scaled, or merged by the kernels (``fused``).

``merge_tensor(plan, info)`` yields the merged tensor ``info.name`` as consecutive flat pieces in the
output dtype, which the engine appends to the shard as they come. Non-float tensors come from the
reference model and tensors no LoRA expert touches are the base, copied bit for bit (a chunk at a
time; ``scale x base`` under ``linear`` with ``normalize: false`` and weights summing to
``scale != 1``, like every expert's full model); every other tensor is merged by ``fused.merge``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from . import chunking, fused
from .chunking import BUFFERS, piece, prefetched, row_chunks
from .plan import Plan
from .safetensors_io import DTYPES, TensorInfo
from .sources import Checkpoint, LoraAdapter


def merge_tensor(plan: Plan, info: TensorInfo) -> Iterator[torch.Tensor]:
    """The merged tensor ``info.name`` in the output dtype, as consecutive flat pieces (each valid until
    the next one is asked for: they may live in reused buffers)."""
    cfg, spec, name = plan.config, plan.config.spec, info.name
    ref_info = plan.reference.infos[name]
    out_dtype = DTYPES[info.dtype]
    shape, n = ref_info.shape, ref_info.numel
    if n == 0:
        yield torch.empty(0, dtype=out_dtype)
        return
    row = n // (shape[0] if shape else 1)
    if not ref_info.is_float:
        yield from _copy(plan.reference, name, shape, row, out_dtype)
        return
    need_base = spec.uses_deltas or any(isinstance(m, LoraAdapter) for m in plan.models)
    base = plan.base if plan.base is not None and need_base else None
    if base is not None and _untouched(plan, name):
        # every input is the base: the base itself, except for linear without normalize, a plain
        # weighted sum: sum_i w_i * base, as for the adapted tensors
        total = sum(cfg.weights())
        summed = spec.name == "linear" and not cfg.method_params()["normalize"] and total != 1.0
        yield from _copy(base, name, shape, row, out_dtype, total if summed else None)
        return
    yield from fused.merge(plan, name, base, shape, row, out_dtype)


def _untouched(plan: Plan, name: str) -> bool:
    """True when every model is a LoRA expert that leaves tensor ``name`` as the base has it."""
    return all(isinstance(m, LoraAdapter) and name not in m.pairs and name not in m.full for m in plan.models)


def _copy(
    src: Checkpoint, name: str, shape: tuple[int, ...], row: int, out_dtype: torch.dtype, scale: float | None = None
) -> Iterator[torch.Tensor]:
    """``src``'s tensor ``name`` cast to ``out_dtype`` (bit for bit when it is the stored dtype), by chunks;
    ``scale``: times that, in float32."""
    dtype = DTYPES[src.infos[name].dtype]

    def jobs(slot: int, r0: int, r1: int) -> list[Callable[[], Any]]:
        start, count = r0 * row, (r1 - r0) * row
        return [lambda: src.read_range(name, start, count, BUFFERS.get(("raw", slot, 0), count, dtype))]

    for slot, _, _, (raw,) in prefetched(list(row_chunks(shape, chunking.CHUNK)), jobs):
        if scale is not None:
            raw = torch.mul(raw.float(), scale, out=BUFFERS.get("out", raw.numel()))
        yield piece(raw, out_dtype, slot)
