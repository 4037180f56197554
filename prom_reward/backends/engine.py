"""What the in-process backends (``vllm``, ``transformers``) share: one worker thread that starts the engine and
runs its blocking calls in order, and prompts rendered and counted with the engine's tokenizer."""

from __future__ import annotations

import asyncio
import concurrent.futures
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prom_reward.backends.base import (
    DEFAULT_TOP_K,
    BackendCapabilities,
    BackendFingerprint,
    GenerationRequest,
    GenerationResult,
    TokenLogprobs,
    make_fingerprint,
    split_continuation,
    with_continuation,
)
from prom_reward.errors import BackendError, ConfigError
from prom_reward.format.wire import WireFormat, template_accepts_system

T = TypeVar("T")


class InProcessEngine(ABC):
    """Base of the in-process backends: the engine starts in the worker thread (``_begin``; on an event loop the
    constructor returns first, and a failed start raises at the first call), where ``generate`` and ``_forced``
    then run for their async forms. ``wire``: ``chat``, ``inst`` or ``raw``; ``system_role``: whether the chat
    template takes a system message (None: detected)."""

    name: str
    capabilities = BackendCapabilities(
        tokens_at_most_bytes=True, streams_results=False, thread_safe=False, continuation_logprobs=True
    )
    model: Any
    wire: WireFormat
    tokenizer: Any
    system_role: bool | None

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its model as given (None for a ready engine) and its wire format."""
        return make_fingerprint(self.name, self.model, self.wire.name)

    def _begin(self, start: Callable[[], None], *, wait: bool) -> None:
        """Run ``start`` (building the engine) in the worker thread; wait for it when ``wait`` (a failed start
        raises here), else a failed start raises at the first call."""
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"prom-reward-{self.name}")
        self._started = self._worker.submit(start)
        self._closed = False
        if wait:
            self._started.result()

    def _ready(self) -> None:
        """Wait for the engine's start (raising its failure); refuse a closed backend."""
        self._started.result()
        if self._closed:
            raise BackendError(f"this {type(self).__name__} was closed; build a new one (or a new PrometheusJudge)")

    async def _astarted(self) -> None:
        """``_ready`` without blocking the loop."""
        await asyncio.wrap_future(self._started)
        self._ready()

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self._worker.submit(fn, *args))

    def _detect_system_role(self, given: bool | None) -> None:
        """``system_role`` as given, else whether the chat template takes a system message."""
        if self.wire.uses_chat_template and given is None:
            given = template_accepts_system(self.tokenizer)
        self.system_role = given

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """The engine's blocking generation (run in the worker thread)."""

    @abstractmethod
    def _forced(self, plans: list[tuple[list[int], int]], top_k: int) -> list[tuple[TokenLogprobs, ...]]:
        """Per (ids of prompt and continuation, how many are the continuation's), the continuation's positions
        with ``top_k`` alternatives each: the engine's blocking teacher forcing (in the worker thread)."""

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """``generate`` in the worker thread."""
        return await self._in_worker(self.generate, requests)

    async def acontinuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        """Teacher forcing in the worker thread; an engine ignores ``deadline``."""
        if len(requests) != len(continuations):
            raise ConfigError(f"got {len(requests)} requests but {len(continuations)} continuations")
        return await self._in_worker(self._teacher_force, requests, continuations, top_k)

    def _teacher_force(
        self, requests: Sequence[GenerationRequest], continuations: Sequence[str], top_k: int
    ) -> list[tuple[TokenLogprobs, ...]]:
        self._ready()
        plans = []
        for r, text in zip(requests, continuations, strict=True):
            joint = self._ids(with_continuation(r, text))
            plans.append((joint, len(split_continuation(self._ids(r), joint))))
        todo = [i for i, (_, size) in enumerate(plans) if size]
        out: list[tuple[TokenLogprobs, ...]] = [() for _ in requests]
        for i, positions in zip(todo, self._forced([plans[i] for i in todo], top_k) if todo else [], strict=True):
            out[i] = positions
        return out

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text the engine reads (wire format + assistant prefix)."""
        text = self.wire.render(request.system, request.user, self.tokenizer, system_role=self.system_role)
        return text + request.assistant_prefix

    def _ids(self, request: GenerationRequest) -> list[int]:
        add = not self.wire.template_has_special_tokens  # a chat template already wrote BOS
        return list(self.tokenizer.encode(self.render(request), add_special_tokens=add))

    async def acount_tokens(self, requests: Sequence[GenerationRequest], deadline: float | None = None) -> list[int]:
        """Prompt tokens per request, tokenized here (fast: on the caller's loop)."""
        return [len(self._ids(r)) for r in requests]

    def special_tokens(self) -> tuple[str, ...]:
        return tuple(self.tokenizer.all_special_tokens) if self.tokenizer is not None else ()

    @abstractmethod
    def _stop(self) -> None:
        """Release the engine (in the worker thread, after what runs there)."""

    def close(self) -> None:
        """Release the engine once its start and running calls are done. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._worker.submit(self._stop).result()
        finally:
            self._worker.shutdown(wait=False)
