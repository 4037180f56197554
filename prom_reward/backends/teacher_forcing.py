"""Teacher forcing: a model's next-token distributions along a given continuation.

A backend with this capability declares ``capabilities.continuation_logprobs`` and has
``acontinuation_logprobs(requests, continuations, top_k, deadline)``:
for each judge request (rendered in *that backend's own* wire format, assistant prefix
included) followed by a given text, it returns one ``TokenLogprobs`` per token of the text:
the text's token, its log-probability, and the top-k alternatives at that position. No
text is generated. This is how a base model reads a judge's output for SE-Cali (the experimental
feature that uses it: ``prom_reward.experimental.calibration``).

- ``vllm``: one ``LLM.generate`` with ``SamplingParams(prompt_logprobs=k, max_tokens=1)``;
- ``openai`` (vLLM servers): ``/tokenize`` then ``/completions`` with token ids and vLLM's
  ``prompt_logprobs`` extension;
- ``transformers``: one forward pass per request.

The continuation's tokens are those of tokenizing prompt + text together, minus the
prompt's own tokens (``split_continuation``), so the text is tokenized as the model
would have produced it after that prompt.

Example:
    >>> split_continuation([1, 5, 7], [1, 5, 7, 9, 4])
    [9, 4]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from prom_reward.backends.base import GenerationRequest, TokenLogprobs

DEFAULT_TOP_K = 20
"""Alternatives per position: vLLM's default ``max_logprobs``."""


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
    """The continuation's token ids: ``joint_ids`` after the prompt's tokens.

    When tokenizing prompt + text together changed the prompt's last tokens (a merge across
    the boundary), keeps the joint tokens after the longest common prefix.
    """
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
