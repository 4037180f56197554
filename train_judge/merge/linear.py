"""``linear``: a weighted average of whole models (model soup).

    merged = sum_i w_i * m_i / sum_i w_i        (normalize: true, the default)
    merged = sum_i w_i * m_i                    (normalize: false)

Weights default to 1.0 each (a plain mean). No base model is needed, except to turn LoRA experts
into full models (``m_i = base + delta W_i``): two experts at 0.5 each give ``base + 0.5 d1 + 0.5 d2``.

The kernels fold ``1 / sum_i w_i`` into the weights (``kernels.combine``); an unnormalized sum
of weights summing to 0 is allowed, a normalized one is refused.

Example:
    >>> _check({"normalize": True}, [1.0, -1.0], [None, None])[0][:32]
    'weights [1.0, -1.0] sum to 0, so'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .methods import MethodSpec, register


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
        name="linear",
        summary="weighted average of full models",
        model_keys=("weight",),
        params={"normalize": True},
        check=_check,
    )
)
