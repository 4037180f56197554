"""Parameter names from the DARE paper and keys from mergekit recipes: accepted with their meaning, or refused.

The DARE paper (and the Prometheus 2 paper, "p 0.1, lambda 1.95") speaks of a drop rate ``p``; this
package's ``density`` is the fraction KEPT, ``1 - p``, so copying "0.1" into ``density`` would keep
10% instead of 90%. ``drop_rate`` (per model or in ``parameters``) is accepted for the DARE methods and
turned into ``density = 1 - drop_rate``; ``p``, ``scale`` and mergekit's ``rescale`` are refused with an
explanation (``HINTS``), and a mergekit recipe (``merge_method:``) is refused with the differences
(``MERGEKIT_RECIPE``), since the same words mean other things here.

Example:
    >>> resolve_drop_rate("dare_linear", {"drop_rate": 0.1, "lambda": 1.95})
    ({'lambda': 1.95, 'density': 0.9}, [])
    >>> resolve_drop_rate("dare_ties", {"drop_rate": 0.1, "density": 0.9})[1]
    ['parameters.drop_rate: given together with parameters.density (density = 1 - drop_rate); give only one']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import fits

HINTS = {
    "p": "the DARE paper's drop probability; write drop_rate: P (density = 1 - P is then set for you) "
    "or density: 1 - P. Not accepted as 'p', which reads as density in other tools",
    "scale": "the DARE paper's rescaling lambda is parameters.lambda here (merged = base + lambda * delta)",
    "rescale": "mergekit's rescale (match each tensor's L1 norm after the drop) is not offered; DARE here "
    "multiplies survivors by 1 / density as in the DARE paper",
}
"""Refused parameter names and why."""

MERGEKIT_RECIPE = (
    "merge_method: this looks like a mergekit recipe, which is not taken as is because the same keys mean "
    "other things here (mergekit's dare_ties sums the agreeing deltas by default where ours averages, its DARE "
    "rescale matches L1 norms where ours divides by density, its TIES keeps floor(density * n) entries and "
    "elects + on a zero sum); rewrite it with method: and, to sum like mergekit, parameters.normalize: false"
)
"""The error for a top-level ``merge_method`` key."""


def parameter_hint(method: str, key: str) -> str | None:
    """Why ``key`` is not a parameter of ``method``, when it is one of the paper's / mergekit's names.

    >>> parameter_hint("ties", "drop_rate")
    'ties does not drop at random; drop_rate is for dare_ties / dare_linear (TIES trims by magnitude: use density)'
    """
    if key == "drop_rate" and not method.startswith("dare_"):
        return (
            f"{method} does not drop at random; drop_rate is for dare_ties / dare_linear "
            "(TIES trims by magnitude: use density)"
        )
    return HINTS.get(key)


def _is_drop_rate(x: Any) -> bool:
    return fits(x, float) and 0 <= x < 1


def resolve_drop_rate(method: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``params`` with ``drop_rate`` replaced by ``density = 1 - drop_rate`` (DARE methods), and problems."""
    if "drop_rate" not in params or not str(method).startswith("dare_"):
        return params, []
    dr = params["drop_rate"]
    if "density" in params:
        return params, [
            "parameters.drop_rate: given together with parameters.density (density = 1 - drop_rate); give only one"
        ]
    if not _is_drop_rate(dr):
        return params, [f"parameters.drop_rate: expected the drop probability p in [0, 1), got {dr!r}"]
    out = {k: v for k, v in params.items() if k != "drop_rate"}
    out["density"] = 1.0 - float(dr)
    return out, []


def model_density(i: int, entry: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """A YAML model entry's density, from ``density`` or ``drop_rate`` (``1 - drop_rate``), and problems."""
    density = entry.get("density")
    if "drop_rate" not in entry:
        return density, []
    dr = entry["drop_rate"]
    if density is not None:
        return density, [f"models[{i}]: drop_rate and density both given (density = 1 - drop_rate); give one"]
    if not _is_drop_rate(dr):
        return density, [f"models[{i}].drop_rate: expected the drop probability p in [0, 1), got {dr!r}"]
    return 1.0 - float(dr), []
