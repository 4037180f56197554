"""``linear``: a weighted average of whole models (model soup).

    merged = sum_i w_i * m_i / sum_i w_i        (normalize: true, the default)
    merged = sum_i w_i * m_i                    (normalize: false)

Weights default to 1.0 each (a plain mean). No base model is needed, except to turn LoRA experts
into full models (``m_i = base + delta W_i``): two experts at 0.5 each give ``base + 0.5 d1 + 0.5 d2``.

Example:
    >>> import torch
    >>> from train_judge.merge.methods import TensorContext
    >>> ctx = TensorContext("w", [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 6.0])], [1.0, 3.0],
    ...                     [None, None], {"normalize": True})
    >>> merge_linear(ctx)
    tensor([2.5000, 5.0000])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .methods import MethodSpec, TensorContext, register


def merge_linear(ctx: TensorContext) -> torch.Tensor:
    """Weighted sum of the full tensors, divided by the weight sum when ``normalize``."""
    weights = list(ctx.weights)
    if ctx.params["normalize"]:  # fold 1 / sum w into the weights: one pass fewer
        total = sum(weights)
        weights = [w / total for w in weights]
    out = torch.mul(ctx.tensors[0], weights[0], out=ctx.buffer("out"))  # not in place: inputs may be shared
    for w, t in zip(weights[1:], ctx.tensors[1:], strict=True):
        out.add_(t, alpha=w)
    return out


def _check(params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]) -> list[str]:
    problems = []
    if not isinstance(params["normalize"], bool):
        problems.append(f"parameters.normalize: expected true or false, got {params['normalize']!r}")
    elif params["normalize"] and abs(sum(weights)) < 1e-12:
        problems.append(
            f"weights {list(weights)} sum to 0, so normalize: true would divide by 0; "
            "change the weights or set normalize: false"
        )
    return problems


SPEC = register(
    MethodSpec(
        elementwise=True,
        name="linear",
        summary="weighted average of full models",
        merge=merge_linear,
        model_keys=("weight",),
        params={"normalize": True},
        check=_check,
    )
)
