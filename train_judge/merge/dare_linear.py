"""``dare_linear``: DARE sparsification (Yu et al., 2024) followed by a weighted sum of task vectors.

    d_i'  = m_i * d_i / k_i,  m_i ~ Bernoulli(k_i) per entry      (drop p = 1 - k_i, rescale)
    merged = base + lambda * sum_i w_i d_i'

Seeded per (``seed``, tensor name, model index). ``density`` is required, in (0, 1] (or the paper's
``drop_rate: p``, meaning ``density = 1 - p``); weights may be any real. With density 1 it equals task
arithmetic. Like mergekit's ``dare_linear`` it sums (no normalization); mergekit rescales survivors
to keep each tensor's L1 norm, this by ``1 / density`` (the DARE paper).

Example:
    >>> import torch
    >>> from train_judge.merge.methods import TensorContext
    >>> d = [torch.tensor([2.0, -1.0]), torch.tensor([-1.0, -3.0])]
    >>> SPEC.merge(TensorContext("w", d, [0.5, 0.5], [1.0, 1.0], {"lambda": 1.0}))
    tensor([ 0.5000, -2.0000])
"""

from __future__ import annotations

from .methods import MethodSpec, register
from .task_vector import TaskVectorMerge, density_problems

SPEC = register(
    MethodSpec(
        elementwise=True,
        name="dare_linear",
        summary="random drop and rescale, weighted sum of task vectors, add to base",
        merge=TaskVectorMerge("random", consensus=False),
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight", "density"),
        params={"lambda": 1.0, "density": None},
        check=density_problems,
    )
)
