"""Check a merge against the checkpoints' headers and plan the output, before any tensor is read.

``make_plan(config)`` opens every input (headers only: names, dtypes, shapes), collects ALL
problems (unreadable inputs, LoRA experts without a base model, tensor names missing or extra in
some model, shape mismatches, full models whose config.json gives another model_type or vocab_size,
adapter modules that do not exist in the base or do not fit its
shapes) and raises one ConfigError listing them. When everything fits it returns a ``Plan``: the
output tensors (name, dtype, shape) in order, cut into shards of at most ``max_shard_size`` bytes.

Example:
    >>> from train_judge.merge.safetensors_io import TensorInfo
    >>> infos = [TensorInfo("a", "F32", (10,)), TensorInfo("b", "F32", (10,)), TensorInfo("c", "F32", (20,))]
    >>> [[i.name for i in shard] for shard in layout_shards(infos, 80)]
    [['a', 'b'], ['c']]
    >>> shard_names(2)
    ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from prom_reward.errors import ConfigError

from .config import MergeConfig, format_problems, parse_size
from .safetensors_io import TensorInfo
from .sources import Checkpoint, LoraAdapter, Source, open_source

_OUT_CODES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
_SHOW = 5


@dataclass
class Plan:
    """What the engine will do: inputs, reference model, output tensors and their shards."""

    config: MergeConfig
    base: Checkpoint | None
    models: list[Source]
    reference: Checkpoint
    """The model whose names, dtypes and auxiliary files (config, tokenizer) the output takes."""
    outputs: list[TensorInfo]
    shards: list[list[TensorInfo]] = field(default_factory=list)

    def close(self) -> None:
        """Close every open input file."""
        for s in [self.base, *self.models]:
            if s is not None:
                s.close()


def layout_shards(infos: list[TensorInfo], max_bytes: int) -> list[list[TensorInfo]]:
    """Cut tensors (in order) into shards of at most ``max_bytes`` (a bigger tensor gets its own shard)."""
    shards: list[list[TensorInfo]] = []
    size = 0
    for info in infos:
        if not shards or (size + info.nbytes > max_bytes and shards[-1]):
            shards.append([])
            size = 0
        shards[-1].append(info)
        size += info.nbytes
    return shards or [[]]


def shard_names(n: int) -> list[str]:
    """File names of ``n`` output shards (``model.safetensors`` when there is one)."""
    if n == 1:
        return ["model.safetensors"]
    return [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOW])
    return shown + (f" and {len(names) - _SHOW} more" if len(names) > _SHOW else "")


def _model_config(source: Checkpoint) -> dict:
    """The ``config.json`` of a checkpoint folder ({} for a lone .safetensors file or no readable config)."""
    try:
        data = json.loads((source.path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a lone .safetensors file (no folder), no config.json, or not JSON
        return {}
    return data if isinstance(data, dict) else {}


def _architecture_problems(reference: Checkpoint, ref_label: str, others: list[tuple[str, Checkpoint]]) -> list[str]:
    """Full models whose ``config.json`` names another architecture (``model_type``) or vocabulary size than
    the reference's: same tensor names and shapes would merge silently into a model of neither kind."""
    ref = _model_config(reference)
    out = []
    for label, m in others:
        cfg = _model_config(m)
        for key in ("model_type", "vocab_size"):
            if key in ref and key in cfg and cfg[key] != ref[key]:
                out.append(
                    f"{label} ({m.path}): config.json {key} is {cfg[key]!r}, {ref_label}'s is {ref[key]!r}; "
                    "merge only models fine-tuned from the same base"
                )
    return out


def make_plan(config: MergeConfig) -> Plan:
    """Open the inputs (headers only), check them against each other, and plan the output shards."""
    problems: list[str] = []
    base: Source | None = None
    if config.base_model:
        try:
            base = open_source(config.base_model)
            if isinstance(base, LoraAdapter):
                problems.append(
                    f"base_model: {config.base_model} is a LoRA adapter; the base must be a full "
                    "model (the one the adapters were trained on)"
                )
        except ConfigError as e:
            problems.append(f"base_model: {e}")
    models: list[Source | None] = []
    for i, entry in enumerate(config.models):
        try:
            models.append(open_source(entry.path))
        except ConfigError as e:
            problems.append(f"models[{i}]: {e}")
            models.append(None)
    full = [(f"models[{i}]", m) for i, m in enumerate(models) if isinstance(m, Checkpoint)]
    loras = [(f"models[{i}]", m) for i, m in enumerate(models) if isinstance(m, LoraAdapter)]
    if loras and not config.base_model:
        problems.append(
            f"base_model: {', '.join(w for w, _ in loras)} are LoRA adapters, which merge as deltas "
            "on a base model; set base_model to the model they were trained on"
        )
    if config.base_model and not config.spec.uses_deltas and not loras and models and None not in models:
        problems.append(
            f"base_model: {config.method} combines the listed models only and uses base_model just to "
            "expand LoRA experts, but every model here is a full checkpoint, so the base would be "
            "silently ignored (mergekit's linear also leaves it out; its slerp uses it as the t = 0 "
            "end); remove base_model, or list the base under models (with a weight) to include it"
        )
    reference = base if isinstance(base, Checkpoint) else (full[0][1] if full else None)
    if reference is None:
        if not problems:
            problems.append("no full model to take tensor names from")
        raise ConfigError(format_problems(problems))

    ref_names = list(reference.infos)
    ref_set = set(ref_names)
    ref_label = "base_model" if reference is base else full[0][0]
    for label, m in full:
        if m is reference:
            continue
        missing = [n for n in ref_names if n not in m.infos]
        extra = sorted(n for n in m.infos if n not in ref_set)
        if missing:
            problems.append(
                f"{label} ({m.path}): {len(missing)} tensors of {ref_label} are missing: {_listing(missing)}"
            )
        if extra:
            problems.append(f"{label} ({m.path}): {len(extra)} tensors not in {ref_label}: {_listing(extra)}")
        bad = [
            f"{n} {m.infos[n].shape} vs {reference.infos[n].shape}"
            for n in ref_names
            if n in m.infos and m.infos[n].shape != reference.infos[n].shape
        ]
        if bad:
            problems.append(f"{label} ({m.path}): {len(bad)} shape mismatches with {ref_label}: {_listing(bad)}")
    problems += _architecture_problems(reference, ref_label, [(w, m) for w, m in full if m is not reference])
    for label, a in loras:
        problems += [f"{label}: {p}" for p in a.problems]
        if not isinstance(base, Checkpoint):
            continue
        unknown = [n for n in a.targets() if n not in ref_set]
        if unknown:
            problems.append(
                f"{label} ({a.path}): adapts {len(unknown)} tensors the base model does not have: "
                f"{_listing(unknown)} (an adapter for another model? tied embeddings saved as "
                "modules_to_save?)"
            )
        bad = []
        for n in a.targets():
            shape_issue = a.shape_problems(n)
            problems += [f"{label}: {p}" for p in shape_issue]
            if (
                n in ref_set
                and not shape_issue
                and set(a.pairs.get(n, {"A": 1, "B": 1})) == {"A", "B"}
                and a.expected_shape(n) != reference.infos[n].shape
            ):
                bad.append(f"{n} {a.expected_shape(n)} vs base {reference.infos[n].shape}")
        if bad:
            problems.append(f"{label} ({a.path}): {len(bad)} deltas do not fit the base shapes: {_listing(bad)}")
    out_dir = Path(config.output)
    if out_dir.exists() and not out_dir.is_dir():
        problems.append(f"output: {out_dir} exists and is a file; choose a folder path")
    if problems:
        for s in [base, *models]:
            if s is not None:
                s.close()
        raise ConfigError(format_problems(problems))

    outputs = []
    for n in ref_names:
        info = reference.infos[n]
        dtype = _OUT_CODES[config.dtype] if config.dtype and info.is_float else info.dtype
        outputs.append(TensorInfo(n, dtype, info.shape))
    return Plan(
        config=config,
        base=base if isinstance(base, Checkpoint) else None,
        models=[m for m in models if m is not None],
        reference=reference,
        outputs=outputs,
        shards=layout_shards(outputs, parse_size(config.max_shard_size)),
    )
