"""A backend wrapper that answers from a ``JudgmentStore`` and saves every new result; only what the store lacks
reaches the inner backend, which ``CachedBackend.deferred`` builds only on a miss."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from prom_reward.backends.base import (
    DEFAULT_TOP_K,
    Backend,
    BackendCapabilities,
    BackendFingerprint,
    ContinuationScorer,
    GenerationRequest,
    GenerationResult,
    TokenLogprobs,
    earliest,
)
from prom_reward.backends.bridge import sync_method
from prom_reward.backends.factory import check_model_folder, make_backend
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.store import JudgmentStore, open_store, request_key
from prom_reward.errors import BackendError, ConfigError

log = logging.getLogger(__name__)
FLUSH_EVERY, FLUSH_SECONDS = 64, 1.0  # a batch's results are saved this many at a time, or this often


class _Saver:
    """Buffers (key, model, request, result) rows and writes them in small transactions."""

    def __init__(self, store: JudgmentStore) -> None:
        self.store = store
        self.rows: list[tuple[str, str | None, GenerationRequest, GenerationResult]] = []
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def add(self, row: tuple[str, str | None, GenerationRequest, GenerationResult]) -> None:
        with self.lock:
            self.rows.append(row)
            due = len(self.rows) >= FLUSH_EVERY or time.monotonic() - self.last >= FLUSH_SECONDS
        if due:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            rows, self.rows, self.last = self.rows, [], time.monotonic()
        self.store.put_many(rows)


class CachedBackend:
    """Wraps ``inner`` (a backend; or, with its ``fingerprint``, ``capabilities`` and ``tokenizer``, a function
    called on the first miss to build it) with a judgment store; ``hits``/``misses`` count requests."""

    def __init__(
        self,
        inner: Backend | Callable[[], Backend],
        store: str | Path | JudgmentStore,
        *,
        fingerprint: BackendFingerprint | None = None,
        tokenizer: Any = None,
        capabilities: BackendCapabilities | None = None,
    ) -> None:
        self._inner: Backend | None = None if fingerprint is not None else inner  # type: ignore[assignment]
        self._build: Callable[[], Backend] | None = inner if fingerprint is not None else None  # type: ignore[assignment]
        self.store = open_store(store)
        self.fingerprint: BackendFingerprint = (
            fingerprint if fingerprint is not None else cast(Backend, inner).fingerprint
        )
        # the keys lack the model a judge server serves: the store neither answers nor saves until named
        self._unnamed = self.fingerprint["model"] is None and isinstance(self._inner, OpenAIServer)
        self.name: str = self.fingerprint["name"]
        self._tokenizer = tokenizer  # not built: the judge reads its special tokens before generating
        if fingerprint is not None and capabilities is None:
            raise ConfigError("CachedBackend: a backend built later needs its capabilities= (its class's declaration)")
        declared = capabilities if capabilities is not None else cast(Backend, inner).capabilities
        self.capabilities = dataclasses.replace(declared, streams_results=False)
        self.hits = self.misses = 0

    @classmethod
    def deferred(
        cls, backend: str | Backend, options: Mapping[str, Any], store: str | Path | JudgmentStore
    ) -> CachedBackend:
        """``backend`` (a name and options, or built) behind ``store`` (opened first); a vLLM engine whose
        fingerprint is known before it starts is started on the first store miss."""
        store, plan = open_store(store), None
        if backend == "vllm":
            from prom_reward.backends.vllm_engine import VLLMEngine  # vLLM itself is imported when it starts

            check_model_folder(options.get("model"))
            plan = VLLMEngine.unstarted(**options)
        if plan is None:
            return cls(make_backend(backend, **options), store)
        build = lambda: make_backend(backend, **options)  # noqa: E731
        return cls(build, store, fingerprint=plan[0], tokenizer=plan[1], capabilities=VLLMEngine.capabilities)

    @property
    def built(self) -> bool:
        """True once the wrapped backend exists."""
        return self._inner is not None

    @property
    def inner(self) -> Backend:
        """The wrapped backend, built now if it was deferred."""
        if self._inner is None:
            assert self._build is not None
            log.info("judgment store: a request is not stored; starting the %s backend", self.name)
            self._inner = self._build()
        return self._inner

    @property
    def gpu_memory_share(self) -> float | None:
        """The inner backend's (a deferred one is built to answer)."""
        return self.inner.gpu_memory_share

    async def aname_model(self, deadline: float | None = None) -> None:
        """Key by the model a judge server given no model serves (asked once), so a store never answers for another
        model; a server that does not answer leaves the keys unnamed (store unused) until the next call."""
        if self._unnamed:
            server = cast(OpenAIServer, self._inner)
            try:
                await server.aserved_model(deadline)
            except BackendError as e:
                log.warning("judgment store: the judge server did not name its model (%s); not using the store", e)
                return
            self.fingerprint, self._unnamed = server.fingerprint, False

    def stored(self, requests: Sequence[GenerationRequest]) -> list[bool]:
        """Per request, whether the store answers it (nothing is built or sent)."""
        if self._unnamed:
            return [False] * len(requests)
        keys = self.keys_for(requests)
        held = self.store.stored_keys(keys)
        return [k in held for k in keys]

    def keys_for(self, requests: Sequence[GenerationRequest]) -> list[str]:
        """The store key of each request; identical requests in one batch get distinct keys."""
        seen: Counter[str] = Counter()
        out = []
        for r in requests:
            base = request_key(self.fingerprint, r)
            out.append(request_key(self.fingerprint, r, dup=seen[base]) if seen[base] else base)
            seen[base] += 1
        return out

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """The stored results of ``requests``, the others from one awaited call of the inner backend."""
        await self.aname_model(earliest(requests))
        if self._unnamed:  # the model that answers is not known: neither answered from the store nor saved
            return list(await cast(Backend, self._inner).agenerate(requests))
        keys = self.keys_for(requests)
        found = self.store.get_many(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            batch = [requests[i] for i in missing]
            model = self.fingerprint.get("model") or self.name
            inner, saver = self.inner, _Saver(self.store)

            def save(j: int, res: GenerationResult) -> None:
                if res.error is None:  # a failed request is asked again, never answered from the store
                    saver.add((keys[missing[j]], model, batch[j], res))

            streams, agenerate = inner.capabilities.streams_results, cast(Any, inner.agenerate)
            try:  # what finished is kept even when the call fails
                results = await (agenerate(batch, on_result=save) if streams else agenerate(batch))
                if len(results) != len(batch):
                    raise BackendError(
                        f"backend {self.name!r} returned {len(results)} results for {len(batch)} requests; "
                        f"a backend must return one result per request, in order"
                    )
                for j, res in enumerate([] if streams else results):
                    save(j, res)
            finally:
                saver.flush()
        answered = dict(zip([keys[i] for i in missing], results if missing else [], strict=True))
        return [answered[k] if k in answered else dataclasses.replace(found[k], stored=True) for k in keys]

    generate = sync_method(agenerate)

    async def acount_tokens(
        self, requests: Sequence[GenerationRequest], deadline: float | None = None
    ) -> list[int] | None:
        return await self.inner.acount_tokens(requests, deadline)

    async def acontinuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        """The inner backend's teacher forcing (not stored), when it declares it."""
        if not self.inner.capabilities.continuation_logprobs:
            raise ConfigError(
                f"continuation_logprobs: expected a backend that teacher-forces, got {self.name!r}, which "
                "declares capabilities.continuation_logprobs=False; use vllm, openai or transformers"
            )
        scorer = cast(ContinuationScorer, self.inner)
        return await scorer.acontinuation_logprobs(requests, continuations, top_k, deadline)

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        return await self.inner.acontext_length(deadline)

    def special_tokens(self) -> tuple[str, ...]:
        """The inner backend's; a deferred one's from the tokenizer it was given (it is not built for this)."""
        if self._inner is None:
            return tuple(self._tokenizer.all_special_tokens) if self._tokenizer is not None else ()
        return self._inner.special_tokens()

    def close(self) -> None:
        """Close the inner backend (if built) and the store. Safe twice."""
        with self.store:  # closed even when the inner backend's close fails
            if self._inner is not None:
                self._inner.close()
