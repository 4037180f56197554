"""``task_arithmetic``: add weighted task vectors to a base model (Ilharco et al., 2023).

    merged = base + lambda * sum_i w_i * (m_i - base)

Weights default to 1.0 and may be negative (subtracting a task); ``lambda`` defaults to 1.0.
A LoRA expert's task vector is its ``delta W`` directly.

Example:
    >>> import torch
    >>> from train_judge.merge.methods import TensorContext
    >>> d = [torch.tensor([1.0, -2.0]), torch.tensor([3.0, 4.0])]
    >>> SPEC.merge(TensorContext("w", d, [1.0, 0.5], [None, None], {"lambda": 2.0}))
    tensor([5., 0.])
"""

from __future__ import annotations

from .methods import MethodSpec, register
from .task_vector import TaskVectorMerge

SPEC = register(
    MethodSpec(
        elementwise=True,
        name="task_arithmetic",
        summary="base + lambda * weighted sum of task vectors",
        merge=TaskVectorMerge("none", consensus=False),
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight",),
        params={"lambda": 1.0},
    )
)
