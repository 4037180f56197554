"""SFT run configuration: frozen dataclasses read from a YAML file (``train_judge/configs/*.yaml``).

Every field is checked on construction; unknown YAML keys are an error that lists the valid ones.

Example:
    >>> cfg = SFTRunConfig.from_dict({"model": "local:smollm2", "task": "absolute", "output_dir": "/tmp/x",
    ...                               "lora": {"r": 16}})
    >>> cfg.lora.r, cfg.lora.alpha, cfg.learning_rate
    (16, 32, 1e-05)
    >>> try:
    ...     SFTRunConfig.from_dict({"model": "m", "task": "absolute", "output_dir": "o", "lr": 1})
    ... except ConfigError as e:
    ...     print(str(e)[:36])
    unknown SFT config key(s) ['lr']; va
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prom_reward.errors import ConfigError

TASKS = ("absolute", "relative")
SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (peft ``LoraConfig``)."""

    r: int = 16
    """Rank."""
    alpha: float = 32
    """Scaling numerator (``lora_alpha``)."""
    dropout: float = 0.05
    """Dropout on the adapter input."""
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Module names to adapt (Mixtral experts: ``w1``, ``w2``, ``w3``; ``lm_head`` allowed)."""

    def __post_init__(self) -> None:
        check_fields(self, "lora.")
        object.__setattr__(self, "target_modules", tuple(self.target_modules))


@dataclass(frozen=True)
class SFTRunConfig:
    """One supervised fine-tuning run of a judge expert."""

    model: str
    """Base model: hub id, local folder, or ``local:smollm2`` (the folder ``make setup`` converts)."""
    task: str
    """``absolute`` (``[RESULT] 1-5``) or ``relative`` (``[RESULT] A|B``)."""
    output_dir: str
    """Where checkpoints and the final model/adapter go (resumes from its last ``checkpoint-*``)."""
    dataset: str = "pocket"
    """``pocket`` (the vicuna_eval collections), a Feedback/Preference Collection hub id, or a local file."""
    data_path: str | None = None
    """For ``pocket``: the ``vicuna_eval.json`` path (default ``benchmarks/data/vicuna_eval.json`` of the checkout)."""
    max_examples: int | None = None
    """Train on at most this many examples (a subset; None = all)."""
    balance_verdicts: bool = False
    """With ``max_examples``: take the subset evenly across verdicts (scores 1-5, or A/B) where possible."""
    prefer_short: bool = False
    """With ``max_examples``: pick the shortest examples of each verdict first (CPU budgets)."""
    verdict_balance: str | int | None = None
    """Resample the records so every verdict has one count before anything else (``train_judge.balance``):
    ``min`` (down-sample), ``max`` (up-sample) or an int per verdict; seeded by ``seed``. None: as read."""
    wire: str = "chat"
    """Wire format of the base model (``chat``, ``inst``, ``raw``); the judge must use the same one."""
    max_length: int = 4096
    """Longest tokenized example; longer ones are dropped (never cut: a cut loses the verdict)."""
    learning_rate: float = 1e-5
    """Peak learning rate."""
    lr_scheduler_type: str = "cosine"
    """Schedule (``cosine``, ``linear``, ``constant``, ``constant_with_warmup``)."""
    warmup_ratio: float = 0.1
    """Share of the steps spent warming up."""
    num_train_epochs: float = 1.0
    """Epochs over the data."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: run the epochs)."""
    per_device_train_batch_size: int = 4
    """Examples per device and step."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (memory for time)."""
    bf16: bool = False
    """bf16 mixed precision (GPU)."""
    dtype: str = "auto"
    """Weights dtype at load time (``auto``: bfloat16 with ``bf16``, else float32)."""
    packing: bool = False
    """Pack examples into ``max_length`` blocks (padding-free; needs flash attention, i.e. a GPU)."""
    padding_free: bool = False
    """Flatten each batch without padding (flash attention only)."""
    lora: LoraSettings | None = None
    """LoRA settings; None = full fine-tune."""
    deepspeed: str | None = None
    """DeepSpeed JSON config path (used under ``accelerate launch``)."""
    seed: int = 42
    """Training seed (also the subset seed)."""
    logging_steps: int = 10
    """Log every n steps."""
    save_steps: int = 100
    """Checkpoint every n steps (resume picks up the last one)."""
    save_total_limit: int | None = 2
    """Keep at most this many checkpoints."""
    torch_threads: int | None = None
    """``torch.set_num_threads`` for CPU runs (None: torch's default)."""
    dev_fraction: float = 0.25
    """For ``pocket``: the share of prompts held out as dev (never trained on)."""
    split_seed: int = 0
    """For ``pocket``: the train/dev split seed."""

    def __post_init__(self) -> None:
        if isinstance(self.lora, Mapping):
            object.__setattr__(self, "lora", LoraSettings(**_known(LoraSettings, self.lora, "lora")))
        if self.verdict_balance is not None:
            check_target(self.verdict_balance)
        check_fields(self)
        if self.num_train_epochs <= 0 and self.max_steps < 1:
            raise ConfigError("set num_train_epochs > 0 or max_steps >= 1")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SFTRunConfig:
        """Build from a mapping (unknown keys are an error)."""
        return cls(**_known(cls, d, "SFT config"))

    def replace(self, **changes: Any) -> SFTRunConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


_COUNTS = "r max_length per_device_train_batch_size gradient_accumulation_steps logging_steps save_steps"
_BOUNDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **dict.fromkeys(f"{_COUNTS} max_examples torch_threads save_total_limit".split(), (">= 1", lambda v: v >= 1)),
    **dict.fromkeys(("learning_rate", "alpha"), ("> 0", lambda v: v > 0)),
    **dict.fromkeys(("warmup_ratio", "dropout"), ("in [0, 1)", lambda v: 0 <= v < 1)),
    "dev_fraction": ("in (0, 1)", lambda v: 0 < v < 1),
}
"""Each bounded field's bound: its wording and its test."""
_CHOICES = {"task": TASKS, "lr_scheduler_type": SCHEDULERS, "dtype": DTYPES}
_KIND_NAMES: dict[Any, str] = {
    bool: "true or false",
    int: "an int",
    float: "a finite number",
    str: "a non-empty str",
    type(None): "null",
    tuple[str, ...]: "a non-empty list of names",
    LoraSettings: "a mapping of LoRA settings (r, alpha, ...)",
}


def fits(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of ``kind`` as a config reads it: an int is no bool, a float (any int or float) is
    finite, a str is not empty, a ``tuple[str, ...]`` is a non-empty list or tuple of such strs."""
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is str:
        return isinstance(value, str) and value != ""
    if typing.get_origin(kind) is tuple:
        return isinstance(value, (list, tuple)) and bool(value) and all(fits(v, str) for v in value)
    return isinstance(value, kind)


def check_fields(cfg: Any, prefix: str = "") -> None:
    """Each field of the dataclass ``cfg`` of the type its annotation names (``typing.get_type_hints``) and
    within its bound (``_BOUNDS``) or choices: a YAML ``"no"`` is no bool, ``.inf`` no learning rate."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value, hint = getattr(cfg, f.name), hints[f.name]
        kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        bound = _BOUNDS.get(f.name)
        if not any(fits(value, k) for k in kinds) or (bound and value is not None and not bound[1](value)):
            what = " or ".join(
                _KIND_NAMES[k] + (f" {bound[0]}" if bound and k is not type(None) else "") for k in kinds
            )
            raise ConfigError(f"{prefix}{f.name} must be {what}, got {value!r}")
        if f.name in _CHOICES and value not in _CHOICES[f.name]:
            raise ConfigError(f"{f.name} must be one of {_CHOICES[f.name]}, got {value!r}")


def check_target(target: Any) -> None:
    """Raise ``ConfigError`` unless ``target`` is ``"min"``, ``"max"`` or an int >= 1."""
    if target not in ("min", "max") and (not fits(target, int) or target < 1):
        raise ConfigError(
            f"verdict balance target: expected 'min' (down-sample to the rarest verdict), 'max' "
            f"(up-sample to the commonest) or an int >= 1 (that many per verdict), got {target!r}"
        )


def read_yaml(path: Path, what: str) -> Any:
    """The parsed YAML file ``path`` (holding ``what``); a ConfigError naming the file and the fix when it cannot be
    read, is not UTF-8 text or is not YAML."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what}: {e}") from e
    except UnicodeDecodeError as e:
        at = f"byte {e.object[e.start]:#04x} at offset {e.start}"
        raise ConfigError(f"{path}: not UTF-8 text ({at}); save it as UTF-8") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e


def _known(cls: type, d: Mapping[str, Any], what: str) -> dict[str, Any]:
    if not isinstance(d, Mapping):
        raise ConfigError(f"{what} must be a mapping, got {type(d).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ConfigError(f"unknown {what} key(s) {unknown}; valid keys: {', '.join(names)}")
    return dict(d)


def load_config(path: str | Path, **overrides: Any) -> SFTRunConfig:
    """Read a YAML config file; ``overrides`` replace its keys (e.g. ``output_dir``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist; see train_judge/configs/ for examples")
    data = read_yaml(p, "SFT config") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p} must hold a YAML mapping of config keys, got {type(data).__name__}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return SFTRunConfig.from_dict(data)
