"""Merge inputs: full Hugging Face checkpoints and PEFT LoRA adapters, read tensor by tensor.

``open_source(path)`` looks at a folder and returns:

- ``Checkpoint``: ``model.safetensors`` or sharded ``model-0000i-of-0000n.safetensors`` with
  ``model.safetensors.index.json`` (a single ``.safetensors`` file path works too). Only headers are
  read when it opens; ``read(name)`` reads one tensor.
- ``LoraAdapter``: ``adapter_config.json`` + ``adapter_model.safetensors`` (PEFT ``LORA``). Each adapted
  module ``M`` (saved as ``base_model.model.M.lora_A.weight`` / ``.lora_B.weight``) becomes a weight
  delta on the base tensor ``M.weight``:

      delta W = s * B @ A,   s = alpha / r   (alpha / sqrt(r) with use_rslora)

  with ``r`` the saved rank (so ``rank_pattern`` is honoured by construction) and ``alpha`` from the
  first ``alpha_pattern`` key matching as peft matches it (``pattern_key``), else ``lora_alpha``; transposed when
  ``fan_in_fan_out``. Full tensors saved for ``modules_to_save`` (``base_model.model.X.weight``)
  replace the base tensor: their delta is ``X - base``. DoRA, LoRA on embeddings and LoRA biases are
  reported as unsupported.

Example:
    >>> LORA_PREFIX, lora_target("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")
    ('base_model.model.', ('model.layers.0.self_attn.q_proj.weight', 'A'))
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch

from prom_reward.errors import ConfigError

from .safetensors_io import TensorFile, TensorInfo, read_header

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
LORA_PREFIX = "base_model.model."
_LORA_RE = re.compile(r"^(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


def lora_target(key: str) -> tuple[str, str] | None:
    """``(base tensor name, "A"|"B")`` for a PEFT LoRA key, or None for other keys."""
    name = key[len(LORA_PREFIX) :] if key.startswith(LORA_PREFIX) else key
    m = _LORA_RE.match(name)
    return (m["module"] + ".weight", m["ab"]) if m else None


def pattern_key(patterns: list[str], module: str) -> str | None:
    """The first ``alpha_pattern`` / ``rank_pattern`` key matching ``module``, as peft matches it, or None.

    peft (``get_pattern_key``) full-matches ``(.*\\.)?(KEY)$`` on the module name: the key is wrapped in
    a group, so an alternation ``q_proj|v_proj`` applies to the whole suffix, not just its ends.

    >>> pattern_key(["q_proj|v_proj"], "model.layers.0.self_attn.v_proj")
    'q_proj|v_proj'
    >>> pattern_key(["o_proj"], "model.layers.0.self_attn.q_proj") is None
    True
    """
    for key in patterns:
        if re.match(rf"(.*\.)?({key})$", module):
            return key
    return None


class Checkpoint:
    """A full checkpoint (single or sharded safetensors) read one tensor at a time."""

    kind = "checkpoint"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.folder = self.path if self.path.is_dir() else self.path.parent
        self.files: dict[str, Path] = {}  # tensor name -> file
        self.infos: dict[str, TensorInfo] = {}
        if self.path.is_file():
            shard_files = [self.path]
        elif (self.path / INDEX).is_file():
            try:
                weight_map = json.loads((self.path / INDEX).read_text(encoding="utf-8"))["weight_map"]
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{self.path / INDEX}: expected JSON with a 'weight_map' object: {e}") from e
            if (
                not isinstance(weight_map, dict)
                or not weight_map
                or not all(isinstance(f, str) and f for f in weight_map.values())
            ):
                raise ConfigError(
                    f"{self.path / INDEX}: expected 'weight_map' to map tensor names to shard file names, got "
                    f"{str(weight_map)[:80]}; fetch the index again (or remove it next to a single {SINGLE})"
                )
            shard_files = sorted({self.path / f for f in weight_map.values()})
            missing = [str(f) for f in shard_files if not f.is_file()]
            if missing:
                raise ConfigError(f"{self.path}: the index names shard files that are missing: {', '.join(missing)}")
        elif (self.path / SINGLE).is_file():
            shard_files = [self.path / SINGLE]
        else:
            pickled = sorted(f.name for f in self.path.glob("*.bin")) if self.path.is_dir() else []
            raise ConfigError(
                f"{self.path}: expected a model folder with {SINGLE} or {INDEX}, or a PEFT "
                f"adapter folder with {ADAPTER_CONFIG}; found neither"
                + (
                    f" (only {', '.join(pickled[:3])}: load it with transformers and save_pretrained("
                    "safe_serialization=True) to write safetensors)"
                    if pickled
                    else ""
                )
            )
        for f in shard_files:
            for name, info in read_header(f).items():
                self.files[name] = f
                self.infos[name] = info
        self._open: dict[Path, TensorFile] = {}

    def read(self, name: str) -> torch.Tensor:
        """One tensor in its stored dtype."""
        return self._file(name).read(name)

    def read_range(self, name: str, start: int, count: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Flat elements ``start`` to ``start + count`` of one tensor, in its stored dtype (into ``out``
        when given, see ``TensorFile.read_range``)."""
        return self._file(name).read_range(name, start, count, out)

    def _file(self, name: str) -> TensorFile:
        f = self.files[name]
        tf = self._open.get(f)
        if tf is None:
            tf = self._open.setdefault(f, TensorFile(f))
        return tf

    def close(self) -> None:
        """Close the open shard files."""
        for tf in self._open.values():
            tf.close()
        self._open.clear()


class LoraAdapter:
    """A PEFT LoRA adapter as per-tensor weight deltas on its base model's tensor names."""

    kind = "lora"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.config: dict[str, Any] = json.loads((self.path / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        except ValueError as e:
            raise ConfigError(f"{self.path / ADAPTER_CONFIG}: not valid JSON: {e}") from e
        if not isinstance(self.config, dict):
            raise ConfigError(
                f"{self.path / ADAPTER_CONFIG}: expected a JSON object (peft's LoraConfig), got "
                f"{type(self.config).__name__}; save the adapter again with peft"
            )
        weights = self.path / ADAPTER_WEIGHTS
        if not weights.is_file():
            raise ConfigError(
                f"{self.path}: has {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS} (adapters saved as "
                ".bin are not supported; re-save with safe_serialization=True)"
            )
        self.file = weights
        self.infos = read_header(weights)
        self.problems: list[str] = []
        if self.config.get("peft_type", "LORA") != "LORA":
            self.problems.append(
                f"{self.path}: peft_type {self.config.get('peft_type')!r} is not supported; "
                "only LORA adapters can be merged"
            )
        if self.config.get("use_dora"):
            self.problems.append(f"{self.path}: DoRA adapters (use_dora: true) are not supported")
        alphas = {"lora_alpha": self.config.get("lora_alpha", 8)}
        patterns = self.config.get("alpha_pattern") or {}
        if not isinstance(patterns, dict):
            self.problems.append(f"{self.path}: alpha_pattern: expected an object, got {patterns!r}")
            patterns = {}
        alphas.update({f"alpha_pattern[{k!r}]": v for k, v in patterns.items()})
        for key, value in alphas.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                self.problems.append(f"{self.path / ADAPTER_CONFIG}: {key}: expected a number, got {value!r}")
        self.pairs: dict[str, dict[str, str]] = {}  # base name -> {"A": key, "B": key}
        self.full: dict[str, str] = {}  # base name -> key of a full replacement tensor (modules_to_save)
        for key in self.infos:
            target = lora_target(key)
            if target is not None:
                self.pairs.setdefault(target[0], {})[target[1]] = key
            elif "lora_embedding" in key or "lora_magnitude" in key or ".lora_" in key:
                self.problems.append(
                    f"{self.path}: tensor {key!r} is not supported (only lora_A/lora_B of "
                    "linear layers, and modules_to_save)"
                )
            else:
                self.full[key[len(LORA_PREFIX) :] if key.startswith(LORA_PREFIX) else key] = key
        for name, ab in self.pairs.items():
            if set(ab) != {"A", "B"}:
                self.problems.append(f"{self.path}: {name} has lora_{next(iter(ab))} but not its partner")
        self._f: TensorFile | None = None
        self._ab: tuple[str, torch.Tensor, torch.Tensor] | None = None  # the current tensor's A and B

    def targets(self) -> list[str]:
        """Base tensor names this adapter changes."""
        return sorted(set(self.pairs) | set(self.full))

    def rank(self, name: str) -> int:
        """The saved rank of the LoRA pair for base tensor ``name``."""
        return self.infos[self.pairs[name]["A"]].shape[0]

    def expected_shape(self, name: str) -> tuple[int, ...]:
        """The base tensor shape this adapter implies for ``name``."""
        if name in self.full:
            return self.infos[self.full[name]].shape
        a, b = self.infos[self.pairs[name]["A"]].shape, self.infos[self.pairs[name]["B"]].shape
        shape = (b[0], a[1])
        return shape[::-1] if self.config.get("fan_in_fan_out") else shape

    def shape_problems(self, name: str) -> list[str]:
        """Inconsistent A/B ranks for ``name`` (empty when fine)."""
        if name in self.full or set(self.pairs.get(name, {})) != {"A", "B"}:
            return []
        a, b = self.infos[self.pairs[name]["A"]].shape, self.infos[self.pairs[name]["B"]].shape
        if len(a) != 2 or len(b) != 2 or a[0] != b[1] or a[0] < 1:
            return [f"{self.path}: {name}: lora_A {a} and lora_B {b} do not form a rank-r product (r >= 1)"]
        return []

    def scale(self, name: str) -> float:
        """``alpha / r`` (``alpha / sqrt(r)`` with use_rslora) for base tensor ``name``."""
        module = name[: -len(".weight")]
        alpha = float(self.config.get("lora_alpha", 8))
        pattern = pattern_key(list(self.config.get("alpha_pattern") or {}), module)
        if pattern is not None:
            alpha = float(self.config["alpha_pattern"][pattern])
        r = self.rank(name)
        return alpha / math.sqrt(r) if self.config.get("use_rslora") else alpha / r

    def _read(self, key: str) -> torch.Tensor:
        if self._f is None:
            self._f = TensorFile(self.file)
        return self._f.read(key)

    def delta(self, name: str, base: torch.Tensor) -> torch.Tensor | None:
        """float32 delta for base tensor ``name`` (None when the adapter leaves it unchanged)."""
        if name in self.full:
            return self._read(self.full[name]).float() - base
        if name not in self.pairs:
            return None
        a = self._read(self.pairs[name]["A"]).float()
        b = self._read(self.pairs[name]["B"]).float()
        d = (b @ a).mul_(self.scale(name))
        return d.T.contiguous() if self.config.get("fan_in_fan_out") else d

    def delta_rows(self, name: str, r0: int, r1: int, base_rows: torch.Tensor) -> torch.Tensor | None:
        """float32 delta of rows ``r0:r1`` of base tensor ``name`` (``base_rows``: those base rows, float32),
        None when the adapter leaves it unchanged. A and B are small and read once per tensor."""
        if name in self.full:
            full = self._read(self.full[name]).reshape(-1, base_rows[0].numel())[r0:r1]
            return full.float().reshape(base_rows.shape) - base_rows
        if name not in self.pairs:
            return None
        if self._ab is None or self._ab[0] != name:
            self._ab = (name, self._read(self.pairs[name]["A"]).float(), self._read(self.pairs[name]["B"]).float())
        _, a, b = self._ab
        if self.config.get("fan_in_fan_out"):
            return (b @ a[:, r0:r1]).T.mul_(self.scale(name)).contiguous()
        return (b[r0:r1] @ a).mul_(self.scale(name))

    def close(self) -> None:
        """Close the adapter file."""
        self._ab = None
        if self._f is not None:
            self._f.close()
            self._f = None


Source = Checkpoint | LoraAdapter


def open_source(path: str | Path) -> Source:
    """A ``LoraAdapter`` for a folder with adapter_config.json, else a ``Checkpoint``."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(
            f"{p}: no such file or folder; expected a model folder, a .safetensors file or a PEFT adapter folder"
        )
    if p.is_dir() and (p / ADAPTER_CONFIG).is_file():
        return LoraAdapter(p)
    return Checkpoint(p)
