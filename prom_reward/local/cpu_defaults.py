"""CPU defaults for vLLM: ``apply_cpu_defaults`` sets ``VLLM_CPU_KVCACHE_SPACE``, when unset, to
``default_kvcache_gib()``; ``cpu_dtype`` picks float32 where the CPU has no bfloat16 arithmetic (why:
docs/design-notes.md)."""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import MutableMapping

logger = logging.getLogger(__name__)


def _total_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        return 8.0


def default_kvcache_gib() -> int:
    """The KV-cache size prom-reward gives a CPU engine: total memory / 8, clamped to [1, 4] GiB."""
    return int(max(1, min(4, _total_memory_gib() // 8)))


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the ``vllm-cpu`` distribution), without importing vLLM."""
    import importlib.metadata as md

    try:
        md.version("vllm-cpu")
    except md.PackageNotFoundError:
        return False
    return True


def cpu_dtype(dtype: str) -> str:
    """The dtype a CPU engine loads for ``dtype``: ``auto`` is ``float32`` on an x86 CPU without bfloat16 arithmetic
    (AVX512-BF16 or AMX, as torch's probes say), where half precision is emulated and runs 2-3x slower than float32;
    else ``dtype`` (on a CPU that is not x86 too: vLLM's ARM and POWER kernels have their own half-precision paths)."""
    if dtype != "auto" or platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return dtype
    import torch

    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return dtype
    logger.info("CPU without bfloat16 arithmetic: dtype auto loads float32 (give dtype='bfloat16' to keep half)")
    return "float32"


def apply_cpu_defaults(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the CPU engine defaults in ``env`` (``os.environ``) where unset; return what was set."""
    env = os.environ if env is None else env
    if env.get("VLLM_CPU_KVCACHE_SPACE"):
        return {}
    env["VLLM_CPU_KVCACHE_SPACE"] = gib = str(default_kvcache_gib())
    if env is os.environ:
        logger.info("vLLM CPU build: VLLM_CPU_KVCACHE_SPACE=%s GiB (set it to override)", gib)
    return {"VLLM_CPU_KVCACHE_SPACE": gib}
