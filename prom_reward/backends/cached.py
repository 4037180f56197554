"""A backend wrapper that answers from a ``JudgmentStore`` and saves every new result.

``generate`` looks every request up, sends only the missing ones to the inner
backend in one call (order kept), saves their results, and answers in input order.
A backend that reports results as they complete (``capabilities.streams_results``:
the ``openai`` backend) has them saved as they arrive, in small transactions (every
``flush_every`` results or ``flush_seconds``), so a crash or a failed request loses
at most the last second of finished work and never stores a failure. Other backends
(the in-process vLLM engine answers a whole batch at once) are saved per call:
chunk long jobs (the CLI's ``--batch-size``) to bound what a crash can lose.

Example:
    >>> import os, tempfile
    >>> from prom_reward.backends.scripted import ScriptedBackend
    >>> from prom_reward.backends.base import GenerationRequest
    >>> path = os.path.join(tempfile.mkdtemp(), "j.sqlite")
    >>> b = CachedBackend(ScriptedBackend(outputs=["Good. [RESULT] 4"]), path)
    >>> [b.generate([GenerationRequest("s", "u")])[0].completions[0].text for _ in range(2)]
    ['Good. [RESULT] 4', 'Good. [RESULT] 4']
    >>> b.hits, b.misses
    (1, 1)
    >>> b.close()
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from prom_reward.backends.base import Backend, GenerationRequest, GenerationResult, TokenLogprobs
from prom_reward.backends.store import JudgmentStore, backend_fingerprint, open_store, request_key
from prom_reward.backends.teacher_forcing import DEFAULT_TOP_K, ContinuationScorer
from prom_reward.errors import BackendError, ConfigError


class _Saver:
    """Buffers (key, model, request, result) rows and writes them in small transactions."""

    def __init__(self, store: JudgmentStore, every: int, seconds: float) -> None:
        self.store, self.every, self.seconds = store, every, seconds
        self.rows: list[tuple[str, str | None, GenerationRequest, GenerationResult]] = []
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def add(self, row: tuple[str, str | None, GenerationRequest, GenerationResult]) -> None:
        with self.lock:
            self.rows.append(row)
            due = len(self.rows) >= self.every or time.monotonic() - self.last >= self.seconds
        if due:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            rows, self.rows, self.last = self.rows, [], time.monotonic()
        self.store.put_many(rows)


class CachedBackend:
    """Wraps ``inner`` with a judgment store (a path or a ``JudgmentStore``).

    ``hits``/``misses`` count requests answered from the store / sent to ``inner``.
    """

    def __init__(
        self, inner: Backend, store: str | Path | JudgmentStore, *, flush_every: int = 64, flush_seconds: float = 1.0
    ) -> None:
        self.inner = inner
        self.flush_every, self.flush_seconds = flush_every, flush_seconds
        self.store = open_store(store)
        self.name: str = inner.name
        self.capabilities = dataclasses.replace(inner.capabilities, streams_results=False)
        """The inner backend's, except that ``generate`` here reports no result before the call returns."""
        self.fingerprint = backend_fingerprint(inner)
        self.hits = 0
        self.misses = 0

    def __getattr__(self, attr: str) -> Any:
        # model, wire, tokenizer ... of the wrapped backend (only called for missing attributes)
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def keys_for(self, requests: Sequence[GenerationRequest]) -> list[str]:
        """The store key of each request; identical requests in one batch get distinct keys."""
        seen: Counter[str] = Counter()
        out = []
        for r in requests:
            base = request_key(self.fingerprint, r)
            out.append(request_key(self.fingerprint, r, dup=seen[base]) if seen[base] else base)
            seen[base] += 1
        return out

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        keys = self.keys_for(requests)
        found = self.store.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            batch = [requests[i] for i in missing]
            model = self.fingerprint.get("model") or self.name
            streams = self.inner.capabilities.streams_results
            if streams:
                saver = _Saver(self.store, self.flush_every, self.flush_seconds)
                try:
                    results = self.inner.generate(  # type: ignore[call-arg]
                        batch, on_result=lambda j, res: saver.add((keys[missing[j]], model, batch[j], res))
                    )
                finally:
                    saver.flush()  # what finished is kept even when the call failed
            else:
                results = self.inner.generate(batch)
            if len(results) != len(batch):
                raise BackendError(
                    f"backend {self.name!r} returned {len(results)} results for {len(batch)} requests; "
                    f"a backend must return one result per request, in order"
                )
            if not streams:
                self.store.put_many((keys[i], model, r, res) for i, r, res in zip(missing, batch, results, strict=True))
            found.update((keys[i], res) for i, res in zip(missing, results, strict=True))
        return [found[k] for k in keys]

    def count_tokens(self, requests: Sequence[GenerationRequest]) -> list[int] | None:
        return self.inner.count_tokens(requests)

    def continuation_logprobs(
        self, requests: Sequence[GenerationRequest], continuations: Sequence[str], top_k: int = DEFAULT_TOP_K
    ) -> list[tuple[TokenLogprobs, ...]]:
        """The inner backend's teacher forcing (not stored); only when it declares ``continuation_logprobs``."""
        if not self.inner.capabilities.continuation_logprobs:
            raise ConfigError(
                f"continuation_logprobs: expected a backend that teacher-forces, got {self.name!r}, which "
                "declares capabilities.continuation_logprobs=False; use vllm, openai or transformers"
            )
        return cast(ContinuationScorer, self.inner).continuation_logprobs(requests, continuations, top_k)

    def context_length(self) -> int | None:
        return self.inner.context_length()

    def special_tokens(self) -> tuple[str, ...]:
        return self.inner.special_tokens()

    def close(self) -> None:
        """Close the inner backend and the store (safe to call twice)."""
        try:
            self.inner.close()
        finally:
            self.store.close()
