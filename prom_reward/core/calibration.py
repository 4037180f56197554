"""SE-Cali plumbing of ``PrometheusJudge``: the base model that reads the judge's outputs by teacher forcing,
its GPU share beside a vLLM judge, and the calibration pass over a batch's valid samples.

Example:
    >>> share_gpu_with_calibration("vllm", {}, {"backend": "vllm", "model": "base"})
    ({'gpu_memory_utilization': 0.45}, {'backend': 'vllm', 'model': 'base', 'gpu_memory_utilization': 0.45})
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from prom_reward.backends import Backend, GenerationRequest, make_backend
from prom_reward.backends.teacher_forcing import ContinuationScorer, teacher_forcing_scorer
from prom_reward.backends.vllm_options import VLLMOptions, share_gpu_memory
from prom_reward.confidence.indicators import mean_entropy
from prom_reward.core.sampler import ItemRun
from prom_reward.errors import ConfigError


def _engine_share(backend: Any, options: dict[str, Any]) -> tuple[bool, float | None]:
    """(whether ``backend`` is a vLLM engine, its GPU share: None = still to be chosen)."""
    if isinstance(backend, str):
        return backend == "vllm", options.get("gpu_memory_utilization")
    engine_options = getattr(backend, "options", None)  # a VLLMEngine built by the caller
    return isinstance(engine_options, VLLMOptions), getattr(engine_options, "gpu_memory_utilization", None)


def share_gpu_with_calibration(backend: Any, options: dict[str, Any], calibration: Any) -> tuple[dict[str, Any], Any]:
    """A vLLM judge and a vLLM calibration model in one process share one GPU: the shares still to be
    chosen split what the others leave of ``DEFAULT_GPU_MEMORY_UTILIZATION`` (0.45 each when neither
    is set; see ``vllm_options.share_gpu_memory``)."""
    cal_options = calibration if isinstance(calibration, dict) else {}
    judge_vllm, judge = _engine_share(backend, options)
    cal_vllm, base = _engine_share(cal_options.get("backend", "vllm") if cal_options else calibration, cal_options)
    if not (judge_vllm and cal_vllm) or not (isinstance(backend, str) or cal_options):
        return options, calibration  # not two vLLM engines, or both already built
    judge, base = share_gpu_memory(judge, base)
    if isinstance(backend, str):
        options = {**options, "gpu_memory_utilization": judge}
    if cal_options:
        calibration = {**cal_options, "gpu_memory_utilization": base}
    return options, calibration


def calibration_scorer(
    calibration: Backend | Mapping[str, Any] | None,
) -> tuple[ContinuationScorer | None, Backend | None]:
    """(what reads the judge's outputs for SE-Cali, the backend built here from ``calibration``'s options
    that the judge then owns and closes; None when it was given built)."""
    if calibration is None:
        return None, None
    owned = None
    if isinstance(calibration, Mapping):
        options = dict(calibration)
        calibration = owned = make_backend(options.pop("backend", "vllm"), **options)
    scorer = teacher_forcing_scorer(calibration) if isinstance(calibration, ContinuationScorer) else None
    if scorer is None:
        raise ConfigError(
            f"calibration: expected a backend that can teacher-force (vllm, openai, transformers) or a dict "
            f"of its options, got {type(calibration).__name__}, which does not declare "
            "capabilities.continuation_logprobs"
        )
    return scorer, owned


async def calibrate(
    scorer: ContinuationScorer, requests: Sequence[GenerationRequest], runs: list[ItemRun], top_k: int, truncation: str
) -> int:
    """Set the base-model entropy of every valid sample's text (one teacher-forcing call); returns the
    number of tokens read. The teacher-forcing call (sync, blocking) runs in a worker thread."""
    where = [
        (i, j) for i, r in enumerate(runs) for j, smp in enumerate(r.samples) if smp.verdict is not None and smp.text
    ]
    if not where:
        return 0
    texts = [runs[i].samples[j].text for i, j in where]
    scored = await asyncio.to_thread(scorer.continuation_logprobs, [requests[i] for i, _ in where], texts, top_k)
    tokens = 0
    for (i, j), positions in zip(where, scored, strict=True):
        runs[i].samples[j] = dataclasses.replace(runs[i].samples[j], base_entropy=mean_entropy(positions, truncation))
        tokens += len(positions)
    return tokens
