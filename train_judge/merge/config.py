"""Merge configuration: frozen dataclasses, validated on construction, loaded from YAML.

A YAML file lists the models, the method and its parameters (relative paths are resolved against
the YAML file's folder)::

    method: dare_linear
    base_model: ~/.cache/prom_reward/SmolLM2-135M-Instruct   # needed by task-vector methods and LoRA
    models:
      - {path: out/absolute-lora, weight: 0.5}
      - {path: out/relative-lora, weight: 0.5}
    parameters: {density: 0.7, lambda: 1.0}
    seed: 0
    output: out/pocket-judge
    max_shard_size: 2GB

Per-model keys: ``path`` (or ``model``), ``weight``, ``density`` (or, for DARE, the paper's
``drop_rate``: see ``paper_names``). ``parameters.weights`` (a list,
one per model) may replace per-model weights. Everything is checked at once and reported together;
checks that need the checkpoints' headers (names, shapes) happen in ``plan.make_plan``.

Example:
    >>> cfg = MergeConfig(method="ties", base_model="b", output="o",
    ...                   models=(ModelEntry("m1"), ModelEntry("m2", weight=2.0)), parameters={"density": 0.5})
    >>> cfg.weights(), cfg.densities(), cfg.method_params()["lambda"]
    ([1.0, 2.0], [0.5, 0.5], 1.0)
    >>> try:
    ...     MergeConfig(method="slerp", output="o", models=(ModelEntry("a", weight=1.0),), parameters={"t": 2})
    ... except ConfigError as e:
    ...     print(e)
    invalid merge config (3 problems):
      - models: slerp takes exactly 2 models, got 1
      - models[0].weight: slerp does not use weight; remove it
      - parameters.t: expected a number in [0, 1] (0 = first model), got 2
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError, UnknownNameError

from ..config import fits, read_yaml
from .methods import METHODS, REQUIRED, MethodSpec
from .paper_names import MERGEKIT_RECIPE, model_density, parameter_hint, resolve_drop_rate

OUT_DTYPES = (None, "float32", "float16", "bfloat16")
_MODEL_KEYS = ("path", "model", "weight", "density", "drop_rate")
_TOP_KEYS = ("method", "base_model", "models", "parameters", "output", "seed", "max_shard_size", "dtype")
RNG_REMOVED = (
    "rng: unknown key: DARE's generator is not chosen any more, its masks always come from torch's MT19937 "
    "(those of every earlier version and of rng: mt19937; rng: philox was removed); remove the rng line. "
    f"Valid keys: {', '.join(_TOP_KEYS)}"
)
_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string like ``"500MB"`` / ``"2GiB"`` (decimal MB/GB, binary MiB/GiB).

    >>> parse_size("2GB"), parse_size("1 MiB"), parse_size(1000)
    (2000000000, 1048576, 1000)
    """
    if fits(value, int):
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
    if not m or m[2].upper() not in _UNITS:
        raise ConfigError(f"max_shard_size: expected bytes or a size like '500MB' or '2GiB', got {value!r}")
    return int(float(m[1]) * _UNITS[m[2].upper()])


@dataclass(frozen=True)
class ModelEntry:
    """One model to merge."""

    path: str
    """A model folder (single or sharded safetensors), a .safetensors file, or a PEFT LoRA adapter folder."""

    weight: float | None = None
    """This model's weight (None: ``parameters.weights`` or 1.0)."""

    density: float | None = None
    """Fraction of task-vector entries kept by TIES/DARE, in (0, 1] (None: ``parameters.density``)."""


@dataclass(frozen=True)
class MergeConfig:
    """A complete merge: inputs, method, parameters, output."""

    method: str
    """Merge method name: linear, task_arithmetic, ties, dare_ties, dare_linear, slerp."""

    models: tuple[ModelEntry, ...]
    """The models to merge (the base model is given separately)."""

    output: str
    """Output folder (created; must be empty or hold an unfinished merge of the same config)."""

    base_model: str | None = None
    """Base model folder: required by task-vector methods and by LoRA experts; config/tokenizer come from it."""

    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Method-level parameters: lambda, density, t, t_by_name, normalize, weights (list)."""

    seed: int = 0
    """Seed of DARE's random drops (per tensor name and model, so order does not matter)."""

    max_shard_size: int | str = "2GB"
    """Largest output shard, in bytes or as '500MB'/'2GiB'; bigger outputs get an index file."""

    dtype: str | None = None
    """Output dtype of floating tensors (None keeps each tensor's dtype from the base/first model)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        params, alias_problems = resolve_drop_rate(self.method, dict(self.parameters or {}))
        object.__setattr__(self, "parameters", params)
        skip = "parameters.drop_rate:" if alias_problems else "\0"  # said once, by resolve_drop_rate
        problems = alias_problems + [p for p in self.problems() if not p.startswith(skip)]
        if problems:
            raise ConfigError(format_problems(problems))

    @property
    def spec(self) -> MethodSpec:
        """The registered method."""
        return METHODS.get(self.method)

    def problems(self) -> list[str]:
        """Every problem of this config that needs no file access (empty when valid)."""
        if not isinstance(self.method, str):
            return [f"method: expected a name, one of {', '.join(METHODS.names())}; got {self.method!r}"]
        try:
            spec = METHODS.get(self.method)
        except UnknownNameError as e:
            return [f"method: {e}"]
        out: list[str] = []
        n = len(self.models)
        if n < spec.min_models or (spec.max_models is not None and n > spec.max_models):
            if spec.min_models == spec.max_models:
                want = f"exactly {spec.min_models}"
            else:
                want = f"at least {spec.min_models}" + (f" and at most {spec.max_models}" if spec.max_models else "")
            out.append(f"models: {spec.name} takes {want} models, got {n}")
        if self.base_model is not None and not fits(self.base_model, str):
            out.append(f"base_model: expected a model folder path, got {self.base_model!r}")
        elif spec.needs_base and not self.base_model:
            out.append(
                f"base_model: {spec.name} merges task vectors (model - base) and needs base_model; "
                "set it to the model the experts were fine-tuned from"
            )
        usable = True  # weights and densities are numbers, so spec.check can run
        for i, m in enumerate(self.models):
            if not isinstance(m, ModelEntry) or not fits(m.path, str):
                out.append(f"models[{i}].path: expected a non-empty path, got {getattr(m, 'path', m)!r}")
                continue
            for key in ("weight", "density"):
                value = getattr(m, key)
                if value is None:
                    continue
                if key not in spec.model_keys:
                    out.append(f"models[{i}].{key}: {spec.name} does not use {key}; remove it")
                elif not fits(value, float):
                    out.append(f"models[{i}].{key}: expected a number, got {value!r}")
                    usable = False
        valid = set(spec.params) | {"weights"}
        for key in self.parameters:
            if key not in valid and parameter_hint(spec.name, key):
                out.append(f"parameters.{key}: not a parameter of {spec.name}: {parameter_hint(spec.name, key)}")
            elif key not in valid:
                out.append(f"parameters.{key}: not a parameter of {spec.name}; valid: {', '.join(sorted(valid))}")
        for key, default in spec.params.items():
            if default is REQUIRED and key not in self.parameters:
                out.append(f"parameters.{key}: required by {spec.name}")
        density = self.parameters.get("density")
        if density is not None and not fits(density, float):
            out.append(f"parameters.density: expected a number in (0, 1], got {density!r}")
            usable = False
        if "lambda" in self.parameters and not fits(self.parameters["lambda"], float):
            out.append(f"parameters.lambda: expected a number, got {self.parameters['lambda']!r}")
        ws = self.parameters.get("weights")
        if ws is not None:
            if "weight" not in spec.model_keys:
                out.append(f"parameters.weights: {spec.name} does not use weights; remove them")
            elif not isinstance(ws, (list, tuple)) or not all(fits(w, float) for w in ws):
                out.append(f"parameters.weights: expected a list of numbers, got {ws!r}")
                usable = False
            elif len(ws) != n:
                out.append(f"parameters.weights: {len(ws)} weights for {n} models; give one weight per model")
            elif any(m.weight is not None for m in self.models if isinstance(m, ModelEntry)):
                out.append("parameters.weights: also set per model; use either parameters.weights or models[i].weight")
        if usable and spec.check is not None:
            out += spec.check(self.method_params(), self.weights(), self.densities())
        if not fits(self.seed, int):
            out.append(f"seed: expected an int, got {self.seed!r}")
        try:
            if parse_size(self.max_shard_size) <= 0:
                out.append(f"max_shard_size: expected a positive size, got {self.max_shard_size!r}")
        except ConfigError as e:
            out.append(str(e))
        if self.dtype not in OUT_DTYPES:
            out.append(f"dtype: expected one of null, float32, float16, bfloat16; got {self.dtype!r}")
        if not fits(self.output, str):
            out.append(f"output: expected an output folder path, got {self.output!r}")
        else:
            inputs = [m.path for m in self.models if isinstance(m, ModelEntry)] + [self.base_model]
            output = Path(self.output).resolve()
            for p in (p for p in inputs if isinstance(p, str) and p):
                if Path(p).resolve() == output:
                    out.append(f"output: {self.output} is also an input; write the merge to a new folder")
                elif Path(p).resolve().is_relative_to(output):  # --overwrite would delete the input
                    out.append(f"output: {self.output} holds the input {p}; write the merge to a folder outside it")
        return out

    def method_params(self) -> dict[str, Any]:
        """Method-level parameters with defaults filled in (``weights`` excluded)."""
        spec = self.spec
        return {k: self.parameters.get(k, v) for k, v in spec.params.items()}

    def weights(self) -> list[float]:
        """Resolved per-model weights."""
        ws = self.parameters.get("weights")
        if ws is not None and len(ws) == len(self.models):
            return [float(w) for w in ws]
        return [float(m.weight) if m.weight is not None else 1.0 for m in self.models]

    def densities(self) -> list[float | None]:
        """Resolved per-model densities (None where neither the model nor the parameters give one)."""
        if "density" not in self.spec.model_keys:
            return [None] * len(self.models)
        default = self.parameters.get("density")
        return [m.density if m.density is not None else default for m in self.models]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for YAML dumps and fingerprints)."""
        d = asdict(self)
        d["models"] = [{k: v for k, v in m.items() if v is not None} for m in d["models"]]
        return d


def format_problems(problems: list[str]) -> str:
    """One ConfigError message listing every problem."""
    s = "s" if len(problems) > 1 else ""
    return f"invalid merge config ({len(problems)} problem{s}):\n" + "\n".join(f"  - {p}" for p in problems)


def config_from_dict(data: Mapping[str, Any], root: str | Path | None = None) -> MergeConfig:
    """A ``MergeConfig`` from parsed YAML/JSON; relative paths are resolved against ``root``.

    >>> config_from_dict({"method": "linear", "models": ["a", {"path": "b", "weight": 3}], "output": "o"},
    ...                  root="/data").models[1]
    ModelEntry(path='/data/b', weight=3, density=None)
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"merge config: expected a mapping with method, models, output; got {type(data).__name__}")
    refused = {"rng": RNG_REMOVED, "merge_method": MERGEKIT_RECIPE}  # keys of other tools and versions: said why
    problems = [
        refused.get(k, f"{k}: unknown key; valid keys: {', '.join(_TOP_KEYS)}") for k in data if k not in _TOP_KEYS
    ]
    problems += [
        f"{k}: missing"
        for k in ("method", "models", "output")
        if k not in data and not (k == "method" and "merge_method" in data)
    ]

    def resolve(p: Any) -> Any:
        if not isinstance(p, str) or root is None:
            return p
        q = Path(p).expanduser()
        return str(q if q.is_absolute() else Path(root) / q)

    models = []
    raw_models = data.get("models") or []
    if not isinstance(raw_models, list):
        problems.append(f"models: expected a list, got {type(raw_models).__name__}")
        raw_models = []
    for i, m in enumerate(raw_models):
        if isinstance(m, str):
            m = {"path": m}
        if not isinstance(m, Mapping):
            problems.append(f"models[{i}]: expected a path or a mapping with path/weight/density, got {m!r}")
            continue
        bad = [k for k in m if k not in _MODEL_KEYS]
        if bad:
            problems.append(
                f"models[{i}]: unknown keys {bad}; valid keys: path (or model), weight, density, "
                "drop_rate (DARE: density = 1 - drop_rate)"
            )
        density, density_problems = model_density(i, m)
        problems += density_problems
        models.append(ModelEntry(path=resolve(m.get("path", m.get("model"))), weight=m.get("weight"), density=density))
    params = data.get("parameters") or {}
    if not isinstance(params, Mapping):
        problems.append(f"parameters: expected a mapping, got {params!r}")
        params = {}
    if problems:
        raise ConfigError(format_problems(problems))
    kwargs = {k: data[k] for k in ("seed", "max_shard_size", "dtype") if k in data}
    return MergeConfig(
        method=data["method"],
        models=tuple(models),
        output=resolve(data["output"]),
        base_model=resolve(data.get("base_model")),
        parameters=dict(params),
        **kwargs,
    )


def load_config(path: str | Path) -> MergeConfig:
    """Read a merge YAML file (relative paths resolve against its folder)."""
    p = Path(path)
    return config_from_dict(read_yaml(p, "merge config"), root=p.resolve().parent)
