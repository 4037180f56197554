"""SE-Cali: a base model reads the judge's outputs by teacher forcing (``BaseModelReader``), and its entropy is
subtracted from the judge's (``confidence.entropy_calibrated``); ``calibrated_judge`` builds such a judge."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from prom_reward.backends import Backend, GenerationRequest, make_backend
from prom_reward.backends.base import DEFAULT_TOP_K, ContinuationScorer
from prom_reward.backends.vllm_options import share_gpu_memory
from prom_reward.confidence.indicators import check_truncation, mean_entropy
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.protocol import Judge
from prom_reward.core.sampler import ItemRun
from prom_reward.errors import ConfigError


def _engine_share(backend: object, options: Mapping[str, Any]) -> tuple[bool, float | None]:
    """(whether ``backend`` is a vLLM engine, its GPU share: None = still to be chosen)."""
    if isinstance(backend, str):
        return backend == "vllm", options.get("gpu_memory_utilization")
    share = backend.gpu_memory_share if isinstance(backend, Backend) else None
    return share is not None, share


class BaseModelReader:
    """The base model of SE-Cali, reading a judge's valid outputs by teacher forcing (a ``SampleReader``).

    Args:
        base: a backend declaring ``capabilities.continuation_logprobs`` (``vllm``, ``openai`` on a vLLM server,
            ``transformers``), or a dict of ``make_backend`` options, built here and closed with the reader.
        top_k: alternatives per position the entropy is read from.
        truncation: how the entropy treats the mass outside the top-k (the judge's ``entropy_truncation``).
    """

    def __init__(
        self, base: Backend | Mapping[str, Any], *, top_k: int = DEFAULT_TOP_K, truncation: str = "tail"
    ) -> None:
        self.truncation = check_truncation(truncation)
        self.owned: Backend | None = None  # the base model built here from options (closed with the reader)
        if isinstance(base, Mapping):
            options = dict(base)
            base = self.owned = make_backend(options.pop("backend", "vllm"), **options)
        if not (isinstance(base, ContinuationScorer) and base.capabilities.continuation_logprobs):
            raise ConfigError(
                "expected a backend that can teacher-force (vllm, openai, transformers) or a dict of its options, "
                f"got {type(base).__name__}, which does not declare capabilities.continuation_logprobs",
                "calibration",
            )
        self.scorer: ContinuationScorer = base
        self.top_k = top_k
        self.tokens = 0  # judge-output tokens read so far

    async def read(self, requests: Sequence[GenerationRequest], runs: list[ItemRun]) -> None:
        """Set the base-model entropy of every valid sample's text (one teacher-forcing call); count the tokens."""
        where = [
            (i, j)
            for i, r in enumerate(runs)
            for j, smp in enumerate(r.samples)
            if smp.verdict is not None and smp.text
        ]
        if not where:
            return
        texts = [runs[i].samples[j].text for i, j in where]
        forced = [requests[i] for i, _ in where]
        deadline = min((r.deadline for r in forced if r.deadline is not None), default=None)
        scored = await self.scorer.acontinuation_logprobs(forced, texts, self.top_k, deadline)
        for (i, j), positions in zip(where, scored, strict=True):
            entropy = mean_entropy(positions, self.truncation)
            runs[i].samples[j] = dataclasses.replace(runs[i].samples[j], base_entropy=entropy)
            self.tokens += len(positions)

    def close(self) -> None:
        """Close the base model when it was built here."""
        if self.owned is not None:
            self.owned.close()


def calibrated_judge(
    model: str | None = None, backend: str | Backend = "vllm", *, base: Backend | Mapping[str, Any], **options: Any
) -> PrometheusJudge:
    """A ``PrometheusJudge`` (``confidence=True``; ``options`` are its other arguments) whose outputs ``base`` reads
    for SE-Cali (its first reader); a vLLM judge and a vLLM base model in one process share one GPU: the shares
    still to be chosen split what the others leave of ``DEFAULT_GPU_MEMORY_UTILIZATION`` (``share_gpu_memory``)."""
    base_options = base if isinstance(base, dict) else {}
    judge_vllm, judge_share = _engine_share(backend, options)
    base_vllm, base_share = _engine_share(base_options.get("backend", "vllm") if base_options else base, base_options)
    if judge_vllm and base_vllm and (isinstance(backend, str) or base_options):  # not both built already
        judge_share, base_share = share_gpu_memory(judge_share, base_share)
        if isinstance(backend, str):
            options = {**options, "gpu_memory_utilization": judge_share}
        if base_options:
            base = {**base_options, "gpu_memory_utilization": base_share}
    reader = BaseModelReader(base, truncation=options.get("entropy_truncation", "tail"))
    readers = (reader, *options.pop("readers", ()))
    try:
        return PrometheusJudge(model, backend, confidence=True, readers=readers, **options)
    except BaseException:
        reader.close()
        raise


def reads_base_model(judge: Judge) -> bool:
    """Whether ``judge``'s results carry SE-Cali (a ``PrometheusJudge`` with a ``BaseModelReader``)."""
    return isinstance(judge, PrometheusJudge) and any(isinstance(r, BaseModelReader) for r in judge.readers)
