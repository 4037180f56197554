"""The task-vector core shared by task arithmetic, TIES, DARE-TIES and DARE-linear.

With base weights ``b`` and task vectors ``d_i = m_i - b`` (or a LoRA expert's ``delta W``), one
computation with three knobs covers the family (``MethodSpec.sparsify`` / ``consensus``, computed by
``kernels.combine`` and ``kernels.consensus``; their checks are here):

1. ``sparsify`` each ``d_i`` with its density ``k_i`` (fraction of entries kept):
   ``"none"`` keeps everything; ``"magnitude"`` (TIES trim) keeps exactly ``round(k_i * n)`` entries
   of that tensor, the largest magnitudes, ties at the cut-off broken by position (lowest index kept;
   mergekit keeps ``floor(k_i * n)``); ``"random"`` (DARE) drops each entry independently with
   probability ``p = 1 - k_i`` (seeded per tensor name and model) and multiplies the survivors by
   ``1 / k_i`` as in the DARE paper, so the expected value is unchanged (mergekit 0.1.5's ``rescale``
   instead scales each tensor so its L1 norm matches the undropped one; not offered here). The
   uniform draws are torch's ``uniform_`` on a ``torch.Generator`` seeded by ``methods.seed_for``, in
   element order (``mt19937``), and an entry is dropped where its draw is ``>= k_i`` (in float32),
   becoming +0.0: the masks of every earlier version, so the shipped pocket judge is re-made bit for bit.
2. ``consensus`` (TIES sign election): ``s = sign(sum_i w_i * d_i')`` per entry (the sign with the
   larger total weighted magnitude), then the disjoint weighted mean over the models that agree:
   ``delta = sum_{i: sign(d_i') = s, d_i' != 0} w_i d_i' / sum_{same i} w_i`` (0 where none agree);
   with ``normalize: false`` the disjoint weighted SUM (no division), as mergekit's ``dare_ties``
   does by default. Where ``sum_i w_i d_i'`` is exactly 0 the elected sign is 0 and the merged delta
   is 0 (mergekit elects + there and averages the positive entries).
   Without consensus: the weighted sum ``delta = sum_i w_i d_i'``.
3. the result ``lambda * delta`` is added to the base by the engine.

Example (two 2x2 task vectors, TIES with density 0.5, weights 1): ``d1 = [[4, -1], [0.5, -3]]``
and ``d2 = [[-2, 2.5], [-5, 1]]`` keep ``[[4, 0], [0, -3]]`` and ``[[0, 2.5], [-5, 0]]``; the elected
signs are ``[[+, +], [-, -]]`` and each entry has one agreeing model, so the merged delta is
``[[4, 2.5], [-5, -3]]`` (``tests/train_judge/merge/test_methods.py``). The densities are checked:
    >>> density_problems({}, [1.0], [1.5])
    ['models[0].density: expected a number in (0, 1] (fraction kept), got 1.5']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def density_problems(
    params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]
) -> list[str]:
    """Problems with densities of a sparsifying method: each must be given and lie in (0, 1]."""
    out = []
    for i, k in enumerate(densities):
        if k is None:
            out.append(
                f"models[{i}].density: missing; set parameters.density (fraction of entries kept, "
                "in (0, 1]) or a per-model density"
            )
        elif not (isinstance(k, (int, float)) and 0 < k <= 1):
            out.append(f"models[{i}].density: expected a number in (0, 1] (fraction kept), got {k!r}")
    return out


def consensus_density_problems(
    params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]
) -> list[str]:
    """The checks of the sign-consensus methods (TIES, DARE-TIES): positive weights and valid densities."""
    from .methods import check_positive_weights

    out = check_positive_weights(params, weights, densities) + density_problems(params, weights, densities)
    if not isinstance(params.get("normalize", True), bool):
        out.append(
            f"parameters.normalize: expected true (disjoint mean) or false (disjoint sum), got {params['normalize']!r}"
        )
    return out
