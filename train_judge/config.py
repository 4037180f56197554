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
from collections.abc import Mapping
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
    alpha: int = 32
    """Scaling numerator (``lora_alpha``)."""
    dropout: float = 0.05
    """Dropout on the adapter input."""
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Module names to adapt (Mixtral experts: ``w1``, ``w2``, ``w3``; ``lm_head`` allowed)."""

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ConfigError(f"lora.r must be an int >= 1, got {self.r!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 < self.alpha < math.inf:
            raise ConfigError(f"lora.alpha must be > 0, got {self.alpha!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ConfigError(f"lora.dropout must be in [0, 1), got {self.dropout!r}")
        mods = tuple(self.target_modules)
        if not mods or not all(isinstance(m, str) and m for m in mods):
            raise ConfigError(f"lora.target_modules must be a non-empty list of module names, got {mods!r}")
        object.__setattr__(self, "target_modules", mods)


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
        _check_types(self)
        for name in ("model", "output_dir", "dataset"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"{name} must be a non-empty str, got {getattr(self, name)!r}")
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.lr_scheduler_type not in SCHEDULERS:
            raise ConfigError(f"lr_scheduler_type must be one of {SCHEDULERS}, got {self.lr_scheduler_type!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")
        for name in (
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "max_length",
            "logging_steps",
            "save_steps",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
        if self.max_examples is not None and (not isinstance(self.max_examples, int) or self.max_examples < 1):
            raise ConfigError(f"max_examples must be None or an int >= 1, got {self.max_examples!r}")
        if self.verdict_balance is not None:
            from .balance import check_target

            check_target(self.verdict_balance)
        if self.torch_threads is not None and (not isinstance(self.torch_threads, int) or self.torch_threads < 1):
            raise ConfigError(f"torch_threads must be None or an int >= 1, got {self.torch_threads!r}")
        if self.num_train_epochs <= 0 and self.max_steps < 1:
            raise ConfigError("set num_train_epochs > 0 or max_steps >= 1")
        if not 0 < self.dev_fraction < 1:
            raise ConfigError(f"dev_fraction must be in (0, 1), got {self.dev_fraction!r}")
        if isinstance(self.lora, Mapping):
            object.__setattr__(self, "lora", LoraSettings(**_known(LoraSettings, self.lora, "lora")))
        elif self.lora is not None and not isinstance(self.lora, LoraSettings):
            raise ConfigError(f"lora must be a mapping of LoRA settings (r, alpha, ...) or null, got {self.lora!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SFTRunConfig:
        """Build from a mapping (unknown keys are an error)."""
        return cls(**_known(cls, d, "SFT config"))

    def replace(self, **changes: Any) -> SFTRunConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


_NUMBERS = ("learning_rate", "warmup_ratio", "num_train_epochs", "dev_fraction")
_INTS = ("max_steps", "seed", "split_seed")
_BOOLS = ("balance_verdicts", "prefer_short", "gradient_checkpointing", "bf16", "packing", "padding_free")
_OPTIONAL_STRS = ("data_path", "deepspeed")


def _check_types(cfg: SFTRunConfig) -> None:
    """Each field of the type it is read as: a YAML ``"no"`` is no bool, ``.inf`` no learning rate."""
    for name in _NUMBERS:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{name} must be a finite number, got {v!r}")
    for name in _INTS:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} must be an int, got {v!r}")
    for name in _BOOLS:
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name} must be true or false, got {getattr(cfg, name)!r}")
    for name in _OPTIONAL_STRS:
        v = getattr(cfg, name)
        if v is not None and (not isinstance(v, str) or not v):
            raise ConfigError(f"{name} must be a path or null, got {v!r}")
    if not isinstance(cfg.wire, str):
        raise ConfigError(f"wire must be a wire format name (chat, inst, raw), got {cfg.wire!r}")
    limit = cfg.save_total_limit
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"save_total_limit must be null or an int >= 1, got {limit!r}")


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
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text (byte at offset {e.start}); save it as UTF-8") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{p} must hold a YAML mapping of config keys, got {type(data).__name__}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return SFTRunConfig.from_dict(data)
