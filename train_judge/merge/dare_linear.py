"""``dare_linear``: DARE sparsification (Yu et al., 2024) followed by a weighted sum of task vectors.

    d_i'  = m_i * d_i / k_i,  m_i ~ Bernoulli(k_i) per entry      (drop p = 1 - k_i, rescale)
    merged = base + lambda * sum_i w_i d_i'

Seeded per (``seed``, tensor name, model index). ``density`` is required, in (0, 1] (or the paper's
``drop_rate: p``, meaning ``density = 1 - p``); weights may be any real. With density 1 it equals task
arithmetic. Like mergekit's ``dare_linear`` it sums (no normalization); mergekit rescales survivors
to keep each tensor's L1 norm, this by ``1 / density`` (the DARE paper).

Example (density 1: ``d = [2, -1]`` and ``[-1, -3]`` at weights 0.5 give ``base + [0.5, -2]``):
    >>> SPEC.sparsify, SPEC.consensus
    ('random', False)
"""

from __future__ import annotations

from .methods import MethodSpec, register
from .task_vector import density_problems

SPEC = register(
    MethodSpec(
        name="dare_linear",
        summary="random drop and rescale, weighted sum of task vectors, add to base",
        sparsify="random",
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight", "density"),
        params={"lambda": 1.0, "density": None},
        check=density_problems,
    )
)
