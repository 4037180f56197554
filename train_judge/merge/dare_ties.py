"""``dare_ties``: DARE sparsification (Yu et al., 2024) followed by TIES sign consensus.

    d_i'  = m_i * d_i / k_i,  m_i ~ Bernoulli(k_i) per entry      (drop p = 1 - k_i, rescale)
    s     = sign(sum_i w_i d_i')
    delta = sum_{i agreeing with s} w_i d_i' / sum_{same i} w_i
    merged = base + lambda * delta

The drop masks come from a generator seeded by (``seed``, tensor name, model index), so a merge is
reproducible and does not depend on tensor order. ``density`` is required, in (0, 1] (or give the
paper's drop rate: ``drop_rate: p`` means ``density = 1 - p``); weights > 0.

Differences from mergekit 0.1.5's ``dare_ties`` (a mergekit recipe is not taken as is: the loader
refuses ``merge_method``): mergekit sums the agreeing deltas (``normalize: false`` by default)
where this averages them (``normalize: true`` by default; set ``normalize: false`` to sum), and
mergekit's ``rescale`` matches each tensor's L1 norm after the drop where this multiplies by
``1 / density`` as in the DARE paper.

Example (density 1 keeps everything, so only the sign consensus acts: ``d = [2, -1]`` and
``[-1, -3]`` give ``[2, -2]``):
    >>> SPEC.sparsify, SPEC.consensus
    ('random', True)
"""

from __future__ import annotations

from .methods import MethodSpec, register
from .task_vector import consensus_density_problems

SPEC = register(
    MethodSpec(
        name="dare_ties",
        summary="random drop and rescale, elect signs, disjoint mean, add to base",
        sparsify="random",
        consensus=True,
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight", "density"),
        params={"lambda": 1.0, "density": None, "normalize": True},
        check=consensus_density_problems,
    )
)
