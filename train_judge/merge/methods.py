"""The merge-method registry: each method declares its parameters as data and merges one tensor.

A method is a ``MethodSpec``: whether it needs a base model, how many models it takes, which
per-model keys (``weight``, ``density``) and method-level parameters (with defaults) it accepts,
an extra validity check, and ``merge(ctx)`` which turns the inputs of ONE tensor into the merged
float32 tensor. Methods with ``uses_deltas`` receive task vectors (model minus base, or a LoRA
expert's delta) and return the merged delta; the others receive the full tensors and return the
merged tensor. The engine does the reading, dtype casting and writing.

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

import torch

from prom_reward.registry import Registry


@dataclass(frozen=True)
class TensorContext:
    """Everything a method sees when merging one tensor."""

    name: str
    """The tensor's name (used for per-name parameters and per-name seeds)."""

    tensors: Sequence[torch.Tensor]
    """float32 inputs, one per model in config order: full tensors, or deltas when ``uses_deltas``.

    Deltas are fresh tensors the method may overwrite; full tensors may be shared (read only)."""

    weights: Sequence[float]
    """Per-model weights (resolved: per-model value, else the ``weights`` list, else 1.0)."""

    densities: Sequence[float | None]
    """Per-model densities (fraction of entries kept), None for methods without sparsification."""

    params: Mapping[str, Any]
    """Method-level parameters, defaults filled in."""

    seed: int = 0
    """Merge seed; random methods derive one generator per (tensor name, model index) from it."""

    generators: dict[int, torch.Generator] | None = None
    """When a tensor is merged in chunks, the generators made for its first chunk, reused for the
    next ones (torch draws a tensor's random numbers in element order, so chunks match one whole draw)."""

    draws: Sequence[torch.Tensor | None] | None = None
    """Random methods: per model, this piece's uniform draws in [0, 1) when the engine drew them ahead
    (on a worker thread, from ``generator(i)`` in element order); None: draw here."""

    scratch: Callable[[str], torch.Tensor] | None = None
    """A float32 buffer of the inputs' shape per key, reused between pieces (None: allocate); the
    result may be returned in one (``scratch("out")``)."""

    def buffer(self, key: str) -> torch.Tensor:
        """A float32 tensor shaped like the inputs (uninitialized): ``scratch(key)`` or a new one."""
        return self.scratch(key) if self.scratch is not None else torch.empty_like(self.tensors[0])

    def seed_for(self, model_index: int) -> int:
        """The seed of model ``model_index``'s generator for this tensor (``seed_for`` below)."""
        return seed_for(self.seed, self.name, model_index)

    def generator(self, model_index: int) -> torch.Generator:
        """A CPU generator seeded from (seed, tensor name, model index): order-independent, reproducible."""
        if self.generators is not None and model_index in self.generators:
            return self.generators[model_index]
        gen = torch.Generator().manual_seed(self.seed_for(model_index))
        if self.generators is not None:
            self.generators[model_index] = gen
        return gen


def seed_for(seed: int, name: str, model_index: int) -> int:
    """The seed of DARE's generator for (merge seed, tensor name, model index): 63 bits of a SHA-256.

    >>> seed_for(0, "w", 1) == seed_for(0, "w", 1) != seed_for(0, "w", 0)
    True
    """
    digest = hashlib.sha256(f"{seed}\0{name}\0{model_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class MethodSpec:
    """One merge method: its declared parameters and its per-tensor merge function."""

    name: str
    """Registry name used in the YAML ``method:`` field."""

    summary: str
    """One line: what the method computes."""

    merge: Callable[[TensorContext], torch.Tensor]
    """Merges one tensor (see ``TensorContext``); returns float32."""

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

    elementwise: bool = False
    """True: each output entry depends only on the same entry of the inputs (and, for DARE, the
    random stream in element order), so the engine may merge a tensor a chunk of rows at a time."""


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
