"""``ties``: TIES-merging (Yadav et al., 2023): trim, elect sign, disjoint mean.

    d_i'  = d_i with all but the top ceil(k_i * n) magnitudes zeroed   (k_i = density)
    s     = sign(sum_i w_i d_i')                                       (elect: larger total mass)
    delta = sum_{i agreeing with s} w_i d_i' / sum_{same i} w_i        (disjoint weighted mean)
    merged = base + lambda * delta

``density`` (per model, or ``parameters.density`` for all) is required, in (0, 1]; the paper keeps
the top 20%. The trim keeps exactly ``round(density * n)`` entries per tensor, ties at the cut-off
broken by position (mergekit: ``floor``). Where ``sum_i w_i d_i'`` is exactly 0 the merged delta is 0
(mergekit elects +). ``normalize: false`` gives the disjoint weighted sum instead of the mean (as
mergekit's ``normalize``). Weights default to 1.0 and must be > 0. See ``task_vector`` for the core.

Example (2x2 task vectors ``[[4, -1], [0.5, -3]]`` and ``[[-2, 2.5], [-5, 1]]``, density 0.5,
weights 1: merged delta ``[[4, 2.5], [-5, -3]]``, hand-computed in the module doc of ``task_vector``
and checked by ``tests/train_judge/merge/test_methods.py``):
    >>> SPEC.sparsify, SPEC.consensus, SPEC.model_keys
    ('magnitude', True, ('weight', 'density'))
"""

from __future__ import annotations

from .methods import MethodSpec, register
from .task_vector import consensus_density_problems

SPEC = register(
    MethodSpec(
        name="ties",
        summary="trim to top-k magnitudes, elect signs, disjoint mean, add to base",
        sparsify="magnitude",
        consensus=True,
        uses_deltas=True,
        needs_base=True,
        model_keys=("weight", "density"),
        params={"lambda": 1.0, "density": None, "normalize": True},
        check=consensus_density_problems,
    )
)
