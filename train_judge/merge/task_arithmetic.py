"""``task_arithmetic``: add weighted task vectors to a base model (Ilharco et al., 2023).

    merged = base + lambda * sum_i w_i * (m_i - base)

Weights default to 1.0 and may be negative (subtracting a task); ``lambda`` defaults to 1.0.
A LoRA expert's task vector is its ``delta W`` directly.

Example (``d = [1, -2]`` and ``[3, 4]``, weights 1 and 0.5, lambda 2: ``base + [5, 0]``):
    >>> SPEC.uses_deltas, SPEC.sparsify, SPEC.consensus, SPEC.params
    (True, 'none', False, {'lambda': 1.0})
"""

from __future__ import annotations

from .methods import MethodSpec, register

SPEC = register(
    MethodSpec(
        name="task_arithmetic",
        summary="base + lambda * weighted sum of task vectors",
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight",),
        params={"lambda": 1.0},
    )
)
