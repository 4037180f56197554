"""Teacher forcing: a model's next-token distributions along a given continuation (``acontinuation_logprobs``),
for the backends that declare ``capabilities.continuation_logprobs``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prom_reward.backends.base import GenerationRequest, TokenLogprobs

DEFAULT_TOP_K = 20  # alternatives per position: vLLM's default max_logprobs


@runtime_checkable
class ContinuationScorer(Protocol):
    """A backend that can teacher-force a given continuation."""

    async def acontinuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        """Per request, one ``TokenLogprobs`` per token of its continuation, in input order."""
        ...


def split_continuation(prompt_ids: Sequence[int], joint_ids: Sequence[int]) -> list[int]:
    """The continuation's token ids: ``joint_ids`` after the prompt's tokens (after their longest common
    prefix, when a merge across the boundary changed the prompt's last tokens)."""
    n = len(prompt_ids)
    if list(joint_ids[:n]) == list(prompt_ids):
        return list(joint_ids[n:])
    common = 0
    while common < min(n, len(joint_ids)) and joint_ids[common] == prompt_ids[common]:
        common += 1
    return list(joint_ids[common:])


def with_continuation(request: GenerationRequest, continuation: str) -> GenerationRequest:
    """``request`` with ``continuation`` appended to its assistant prefix."""
    import dataclasses

    return dataclasses.replace(request, assistant_prefix=request.assistant_prefix + continuation)
