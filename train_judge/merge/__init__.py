"""Weight merging for judge checkpoints: linear, task arithmetic, TIES, DARE-TIES, DARE-linear, SLERP.

Merges full safetensors checkpoints (single or sharded) and PEFT LoRA experts tensor by tensor,
streaming, so peak memory is a few tensors per input model. See ``train_judge/merge/README.md``.

Run it as ``python -m train_judge.merge CONFIG.yaml`` or from Python::

    from train_judge.merge import load_config, run_merge
    report = run_merge(load_config("merge.yaml"))

Example:
    >>> from train_judge.merge import METHODS
    >>> "dare_ties" in METHODS
    True
"""

from __future__ import annotations

from . import dare_linear, dare_ties, linear, slerp, task_arithmetic, ties  # noqa: F401  (register methods)
from .config import MergeConfig, ModelEntry, config_from_dict, load_config
from .engine import MergeReport, run_merge
from .methods import METHODS, MethodSpec

__all__ = [
    "METHODS",
    "MergeConfig",
    "MergeReport",
    "MethodSpec",
    "ModelEntry",
    "config_from_dict",
    "load_config",
    "run_merge",
]
