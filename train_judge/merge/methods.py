"""The merge-method registry: each method declares its parameters and its computation as data.

A method is a ``MethodSpec``: whether it needs a base model, how many models it takes, which
per-model keys (``weight``, ``density``) and method-level parameters (with defaults) it accepts,
an extra validity check, and what the kernels compute for it: methods with ``uses_deltas`` merge
task vectors (model minus base, or a LoRA expert's delta) with a ``sparsify`` step (none, TIES's
magnitude trim, DARE's random drop) and, with ``consensus``, TIES's sign election; the others
(linear, SLERP) merge the full tensors. ``fused`` runs them (``kernels``); the engine does the
reading, dtype casting and writing.

Example:
    >>> import train_judge.merge  # registers the built-in methods
    >>> METHODS.names()
    ['dare_linear', 'dare_ties', 'linear', 'slerp', 'task_arithmetic', 'ties']
    >>> METHODS.get("ties").needs_base
    True
    >>> METHODS.get("model_soup")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    UnknownNameError: unknown merge method 'model_soup'; valid names: dare_linear, dare_ties, linear, ...
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prom_reward.registry import Registry


def seed_for(seed: int, name: str, model_index: int) -> int:
    """The seed of DARE's generator for (merge seed, tensor name, model index): 63 bits of a SHA-256.

    >>> seed_for(0, "w", 1) == seed_for(0, "w", 1) != seed_for(0, "w", 0)
    True
    """
    digest = hashlib.sha256(f"{seed}\0{name}\0{model_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class MethodSpec:
    """One merge method: its declared parameters and what the kernels compute for it."""

    name: str
    """Registry name used in the YAML ``method:`` field."""

    summary: str
    """One line: what the method computes."""

    uses_deltas: bool = False
    """True: inputs are task vectors and the result is a delta added to the base model."""

    needs_base: bool = False
    """True: ``base_model`` is required (task-vector methods)."""

    min_models: int = 1
    """Fewest models (not counting the base)."""

    max_models: int | None = None
    """Most models (None = no limit)."""

    model_keys: tuple[str, ...] = ("weight",)
    """Per-model parameters accepted (``weight``, ``density``)."""

    params: Mapping[str, Any] = field(default_factory=dict)
    """Method-level parameters and their defaults (``REQUIRED`` marks ones without a default)."""

    check: Callable[[Mapping[str, Any], Sequence[float], Sequence[float | None]], list[str]] | None = None
    """Extra checks on (params, weights, densities); returns problem strings (empty = fine)."""

    sparsify: str = "none"
    """Task-vector methods: ``none``, ``magnitude`` (TIES trim: the top ``density`` of each tensor's
    ``|delta|``) or ``random`` (DARE: drop with probability ``1 - density``, rescale by ``1 / density``)."""

    consensus: bool = False
    """Task-vector methods: TIES sign election and disjoint weighted mean (else a weighted sum)."""


REQUIRED = object()
"""Default marking a parameter the user must give."""

METHODS: Registry[MethodSpec] = Registry("merge method")


def register(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to ``METHODS`` under its name and return it."""
    return METHODS.register(spec.name, spec)


def check_positive_weights(
    params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]
) -> list[str]:
    """Sign-consensus methods need weights > 0 (a negative weight would flip the elected sign)."""
    bad = [f"models[{i}].weight = {w}" for i, w in enumerate(weights) if not w > 0]
    return (
        [
            f"{', '.join(bad)}: this method elects signs, so weights must be > 0; "
            "use task_arithmetic or dare_linear to subtract a model"
        ]
        if bad
        else []
    )
