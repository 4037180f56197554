"""``slerp``: spherical linear interpolation between exactly two models, tensor by tensor.

With ``a``, ``b`` the two tensors flattened, ``cos(theta) = <a, b> / (|a| |b|)`` and ``t`` in [0, 1]:

    merged = sin((1 - t) theta) / sin(theta) * a + sin(t theta) / sin(theta) * b

falling back to linear interpolation ``(1 - t) a + t b`` when the vectors are nearly colinear
(``|cos(theta)| > 0.9995``) or one of them is zero. ``t = 0`` gives the first model, ``t = 1`` the
second. ``t`` is a number, and ``t_by_name`` optionally maps glob patterns of tensor names to other
values (first matching pattern wins), e.g. ``{"*.mlp.*": 0.3}``.

The engine (``fused._slerp``) sums ``<a, b>``, ``|a|^2`` and ``|b|^2`` over a tensor's chunks,
takes ``(c_a, c_b)`` from ``slerp_coefficients`` and writes ``c_a a + c_b b`` (``kernels.slerp_out``).

Example (orthogonal unit vectors at t = 0.5 land on the arc's midpoint):
    >>> [round(c, 4) for c in slerp_coefficients(0.0, 1.0, 1.0, t_for("w", {"t": 0.5}))]
    [0.7071, 0.7071]
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..config import fits
from .methods import MethodSpec, register

COLINEAR = 0.9995


def t_for(name: str, params: Mapping[str, Any]) -> float:
    """The interpolation factor for tensor ``name`` (first matching ``t_by_name`` pattern, else ``t``).

    >>> t_for("model.layers.0.mlp.up_proj.weight", {"t": 0.5, "t_by_name": {"*.mlp.*": 0.2}})
    0.2
    """
    for pattern, value in (params.get("t_by_name") or {}).items():
        if fnmatch.fnmatchcase(name, pattern):
            return float(value)
    return float(params["t"])


def slerp_coefficients(dot: float, norm_a: float, norm_b: float, t: float) -> tuple[float, float]:
    """``(c_a, c_b)`` with ``slerp(a, b, t) = c_a * a + c_b * b``, from ``<a, b>``, ``|a|`` and ``|b|``.

    >>> [round(c, 4) for c in slerp_coefficients(0.0, 1.0, 1.0, 0.5)]
    [0.7071, 0.7071]
    """
    if norm_a == 0.0 or norm_b == 0.0:
        return 1 - t, t
    cos = max(-1.0, min(1.0, dot / (norm_a * norm_b)))
    if abs(cos) > COLINEAR:
        return 1 - t, t
    theta = math.acos(cos)
    s = math.sin(theta)
    return math.sin((1 - t) * theta) / s, math.sin(t * theta) / s


def _check(params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]) -> list[str]:
    problems = []
    t, tbn = params["t"], params["t_by_name"]
    if not fits(t, float) or not 0 <= t <= 1:
        problems.append(f"parameters.t: expected a number in [0, 1] (0 = first model), got {t!r}")
    if not isinstance(tbn, dict):
        problems.append(f"parameters.t_by_name: expected a mapping of name patterns to t, got {tbn!r}")
    for k, v in tbn.items() if isinstance(tbn, dict) else ():
        if not fits(v, float) or not 0 <= v <= 1:
            problems.append(f"parameters.t_by_name[{k!r}]: expected a number in [0, 1], got {v!r}")
    return problems


SPEC = register(
    MethodSpec(
        name="slerp",
        summary="spherical interpolation of two models at t",
        min_models=2,
        max_models=2,
        model_keys=(),
        params={"t": 0.5, "t_by_name": {}},
        check=_check,
    )
)
