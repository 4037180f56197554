"""A backend that replays scripted outputs (a list, or ``respond(request, sample_index)``) and records every
call: exact, model-free tests of judge logic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from prom_reward.backends.base import (
    BackendCapabilities,
    BackendFingerprint,
    Completion,
    GenerationRequest,
    GenerationResult,
    make_fingerprint,
)
from prom_reward.errors import BackendError

Scripted = str | Completion


@dataclass(eq=False)
class ScriptedBackend:
    """Replays outputs; ``calls`` holds the request lists of each ``generate`` call."""

    name = "scripted"
    capabilities = BackendCapabilities(  # word counts can exceed bytes (tokens_per_word)
        tokens_at_most_bytes=False, streams_results=False, thread_safe=False, continuation_logprobs=False
    )
    gpu_memory_share = None  # no engine

    outputs: Sequence[Scripted] | None = None
    respond: Callable[[GenerationRequest, int], Scripted] | None = None
    _: KW_ONLY
    context: int | None = None
    tokens_per_word: float = 1.0
    calls: list[list[GenerationRequest]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if (self.outputs is None) == (self.respond is None):
            raise BackendError("ScriptedBackend: give exactly one of outputs=[...] or respond=fn")
        self._queue = list(self.outputs) if self.outputs is not None else []

    def _next(self, request: GenerationRequest, index: int) -> Completion:
        if self.respond is not None:
            out = self.respond(request, index)
        elif self._queue:
            out = self._queue.pop(0)
        else:
            raise BackendError("ScriptedBackend ran out of scripted outputs; script more of them")
        if isinstance(out, Completion):
            return out
        return Completion(text=out, finish_reason="stop", completion_tokens=len(out.split()))

    async def agenerate(self, requests: Sequence[GenerationRequest], **options: Any) -> list[GenerationResult]:
        """``generate`` on the caller's loop (``options``: a streaming subclass's ``on_result``)."""
        return self.generate(requests, **options)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.calls.append(list(requests))
        counts = self._count(requests)
        return [
            GenerationResult(tuple(self._next(r, i) for i in range(r.n)), prompt_tokens=c)
            for r, c in zip(requests, counts, strict=True)
        ]

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its name only: no model, no wire format."""
        return make_fingerprint(self.name)

    def _count(self, requests: Sequence[GenerationRequest]) -> list[int]:
        return [int(len((r.system + " " + r.user).split()) * self.tokens_per_word) for r in requests]

    async def acount_tokens(self, requests: Sequence[GenerationRequest], deadline: float | None = None) -> list[int]:
        """Words per request (times ``tokens_per_word``)."""
        return self._count(requests)

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        return self.context

    def special_tokens(self) -> tuple[str, ...]:
        return ()  # no tokenizer

    def close(self) -> None:
        pass

    @property
    def remaining(self) -> int:
        """Scripted outputs not consumed yet."""
        return len(self._queue)
