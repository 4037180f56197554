"""The backend protocol: generate texts (and token logprobs) for a batch of judge prompts.

A backend gets ``GenerationRequest`` objects (unwired system prompt and filled template) and renders them in
its wire format; it declares what it can do in ``capabilities``, its model's identity in ``fingerprint``
and its engine's GPU share in ``gpu_memory_share``; the protocol is async, each method bounded by a deadline,
and an in-process engine runs its blocking calls in a worker thread of its own.

Example:
    >>> req = GenerationRequest(system="You judge.", user="###Task...", n=2,
    ...                         sampling=SamplingConfig(max_tokens=8))
    >>> req.n
    2
    >>> from prom_reward.backends.scripted import ScriptedBackend
    >>> ScriptedBackend(outputs=[]).capabilities.thread_safe
    False
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol, TypedDict, runtime_checkable

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.errors import ConfigError


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated position: the token sampled there and ``top``, decoded token text -> log-probability
    (the sampled token included; ids that decode alike summed)."""

    token: str
    """Decoded text of the token that was generated at this position."""

    logprob: float
    """Log-probability of the generated token."""

    top: dict[str, float] = field(default_factory=dict)
    """Decoded text -> log-probability for the top-k alternatives at this position."""


def add_logprob(top: dict[str, float], text: str, logprob: float) -> None:
    """Put ``text`` into a ``TokenLogprobs.top`` being built, summing probabilities when the text is already there
    (another id decoded to it)."""
    prev = top.get(text)
    top[text] = logprob if prev is None else float(math.log(math.exp(prev) + math.exp(logprob)))


@dataclass(frozen=True)
class GenerationRequest:
    """One judge prompt to complete ``n`` times."""

    system: str
    """System prompt (the wire format decides whether it is folded into the user turn)."""

    user: str
    """The user message: the judge format's filled template (Prometheus 2's ends with ``###Feedback: ``)."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampling options for this request."""

    n: int = 1
    """Number of independent samples."""

    assistant_prefix: str = ""
    """Text the judge has already 'written': generation continues after it
    (used to force a verdict after the judge format's ``force_prefix``)."""

    attempt: int = 0
    """Re-sampling round this request belongs to (0 = first). Backends ignore it; caches key on
    it so a retry asks for fresh samples instead of replaying the stored unparseable ones."""

    deadline: float | None = None
    """Monotonic time by which a transport must have answered (each attempt's timeout is cut to it, none starts
    after it); None: the backend's own timeout. In-process engines ignore it; caches do not key on it."""

    judge_format: str = "prometheus2"
    """The name of the judge format that wrote the prompt (``JudgeFormat.name``). Backends ignore it; judgment
    stores key on it, so two formats' judgments of the same text never mix."""


def earliest(requests: Sequence[GenerationRequest]) -> float | None:
    """The earliest ``deadline`` of ``requests`` (None when none has one): what bounds their batch's calls."""
    return min((r.deadline for r in requests if r.deadline is not None), default=None)


@dataclass(frozen=True)
class Completion:
    """One sample returned by a backend."""

    text: str
    """Generated text (excluding the prompt and any assistant_prefix)."""

    logprobs: tuple[TokenLogprobs, ...] | None = None
    """Per generated token, when logprobs were requested; else None."""

    finish_reason: str | None = None
    """'stop', 'length', ... as reported by the engine."""

    completion_tokens: int = 0
    """Number of generated tokens."""


@dataclass(frozen=True)
class GenerationResult:
    """The ``n`` samples for one request, plus token accounting."""

    completions: tuple[Completion, ...]
    prompt_tokens: int = 0
    stored: bool = False
    """True when a judgment store answered the request (``CachedBackend``): nothing was generated for it."""
    error: str | None = None
    """Why this request got no completions (the transport failed it: unreachable, 5xx, timed out; or the server
    rejected it); None when it was answered. A failed request never fails its batch-mates."""
    rejected: bool = False
    """With ``error``: the server rejected the request itself (HTTP 4xx), so it is the item's fault, not retried."""


@dataclass(frozen=True, kw_only=True)
class BackendCapabilities:
    """What a backend declares it can do beyond ``agenerate``/``acount_tokens``/``acontext_length``/``close``.
    Every field is given: a backend states each capability, none is assumed."""

    tokens_at_most_bytes: bool
    """Its tokenizer never makes more tokens than UTF-8 bytes (byte-level BPE, byte-fallback SentencePiece),
    so the context check (``prom_reward.core.context``) skips counting a prompt whose bytes surely fit."""

    streams_results: bool
    """``agenerate`` also takes ``on_result(index, result)`` and calls it as each result completes, so a
    judgment store (``CachedBackend``) saves results as they arrive instead of per call."""

    thread_safe: bool
    """Several threads or tasks may call ``agenerate`` at once (the batched reward then runs batches
    concurrently); a backend without it is awaited one call at a time."""

    continuation_logprobs: bool
    """It teacher-forces: it has ``acontinuation_logprobs(requests, continuations, top_k, deadline)`` (a
    ``prom_reward.backends.teacher_forcing.ContinuationScorer``; what SE-Cali calibration needs)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise ConfigError(f"BackendCapabilities.{f.name}: expected True or False, got {value!r}")


class BackendFingerprint(TypedDict):
    """What identifies the judge model behind a backend (``Backend.fingerprint``). The judgment store keys every
    request on it and a job's manifest records it, so a backend's values never change: a change would orphan
    every judgment stored with it."""

    name: str
    """The backend's ``name`` (``vllm``, ``openai`` ...)."""

    model: str | None
    """The model it runs (a hub id or folder; a model object given loaded: its ``str``), None when it has none
    or it is not known yet (an ``openai`` backend before ``GET /models`` named it)."""

    wire: str | None
    """The name of its wire format (``chat``, ``inst``, ``raw``), None when it has none."""


def make_fingerprint(name: str, model: object = None, wire: str | None = None) -> BackendFingerprint:
    """A backend's fingerprint: ``model`` as text (None stays None).

    >>> make_fingerprint("vllm", "org/judge", "chat")
    {'name': 'vllm', 'model': 'org/judge', 'wire': 'chat'}
    """
    return {"name": name, "model": None if model is None else str(model), "wire": wire}


@runtime_checkable
class Backend(Protocol):
    """What the judge needs from a model server or engine."""

    name: str
    """A short name for messages and the judgment store's fingerprint (``vllm``, ``openai`` ...)."""

    capabilities: BackendCapabilities
    """What this backend can do beyond these methods (declared by the class, read by the callers)."""

    @property
    def fingerprint(self) -> BackendFingerprint:
        """What identifies the model behind this backend: the judgment store's keys, a job's manifest."""
        ...

    @property
    def gpu_memory_share(self) -> float | None:
        """The share of the GPU's memory its in-process engine takes (a vLLM engine's
        ``gpu_memory_utilization``), which another engine started in this process must leave; None when it
        takes none so (a server, ``transformers``, a scripted backend, a vLLM engine given ready as ``llm=``)."""
        ...

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Complete every request (all in one batch where possible), in input order. A request the transport
        fails gets a result with ``error``; a failure of the whole call (the engine died) raises ``BackendError``.
        Awaited on the caller's loop: blocking work (an in-process engine) runs in a worker thread."""
        ...

    async def acount_tokens(
        self, requests: Sequence[GenerationRequest], deadline: float | None = None
    ) -> list[int] | None:
        """Prompt length in tokens for each request as the model would see it, or None if unknown."""
        ...

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        """The model's context window in tokens, or None if unknown."""
        ...

    def special_tokens(self) -> tuple[str, ...]:
        """The chat special tokens of the model's tokenizer (neutralised in judged texts), or () when the
        tokenizer is not here (a server, a scripted backend)."""
        ...

    def close(self) -> None:
        """Release the engine/connections. Safe to call twice."""
        ...


def api_key_of(given: str | None) -> str | None:
    """The API key of a judge server: ``given``, else ``$PROM_REWARD_API_KEY``, else ``$OPENAI_API_KEY``."""
    return given or os.environ.get("PROM_REWARD_API_KEY") or os.environ.get("OPENAI_API_KEY")


@dataclass(frozen=True)
class JudgeServer:
    """Where a judge server is and how to ask it, as every request of a run asks it (the start-up checks too)."""

    urls: tuple[str, ...]
    """Its base URLs, each ending in ``/v1``."""
    model: str | None
    """The served model asked for; None: the first ``GET /models`` lists."""
    api_key: str | None = field(default=None, repr=False)
    """The bearer token (``api_key_of``: given, else the environment's)."""
