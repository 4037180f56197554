"""A backend wrapper that answers from a ``JudgmentStore`` and saves every new result.

``generate`` looks every request up, sends only the missing ones to the inner
backend in one call (order kept), saves their results as soon as that call
returns, and answers in input order. Results are therefore saved per backend
call: the judge sends all items of one ``grade``/``compare`` call together, so
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

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendError
from ..store import JudgmentStore, backend_fingerprint, open_store, request_key
from .base import Backend, GenerationRequest, GenerationResult


class CachedBackend:
    """Wraps ``inner`` with a judgment store (a path or a ``JudgmentStore``).

    ``hits``/``misses`` count requests answered from the store / sent to ``inner``.
    """

    def __init__(self, inner: Backend, store: "str | Path | JudgmentStore") -> None:
        self.inner = inner
        self.store = open_store(store)
        self.name: str = getattr(inner, "name", type(inner).__name__)
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
            results = self.inner.generate(batch)
            if len(results) != len(batch):
                raise BackendError(
                    f"backend {self.name!r} returned {len(results)} results for {len(batch)} requests; "
                    f"a backend must return one result per request, in order"
                )
            model = self.fingerprint.get("model") or self.name
            self.store.put_many((keys[i], model, r, res) for i, r, res in zip(missing, batch, results))
            found.update((keys[i], res) for i, res in zip(missing, results))
        return [found[k] for k in keys]

    def count_tokens(self, requests: Sequence[GenerationRequest]) -> list[int] | None:
        return self.inner.count_tokens(requests)

    def context_length(self) -> int | None:
        return self.inner.context_length()

    def close(self) -> None:
        """Close the inner backend and the store (safe to call twice)."""
        try:
            self.inner.close()
        finally:
            self.store.close()
