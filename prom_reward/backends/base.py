"""The backend protocol: generate texts (and token logprobs) for a batch of judge prompts, each call async and
bounded by a deadline; what a backend can do is declared in ``capabilities``. What the in-process backends
(``vllm``, ``transformers``) share is ``InProcessEngine``: one worker thread that starts the engine and runs its
blocking calls in order, and prompts rendered and counted with the engine's tokenizer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, TypeVar, runtime_checkable

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.declared import check, setting
from prom_reward.errors import BackendError, ConfigError, UnknownNameError
from prom_reward.format.wire import WireFormat, get_wire_format, template_accepts_system

T = TypeVar("T")


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated position: the decoded token sampled there, its log-probability, and ``top``, decoded text
    -> log-probability of the top-k alternatives (the sampled token included; ids that decode alike summed)."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


def position(token: str, logprob: float, alternatives: Iterable[tuple[str, float]]) -> TokenLogprobs:
    """A ``TokenLogprobs`` of ``alternatives`` (texts that decode alike summed), the sampled token among them."""
    top: dict[str, float] = {}
    for text, lp in alternatives:
        prev = top.get(text)
        top[text] = lp if prev is None else float(math.log(math.exp(prev) + math.exp(lp)))
    top.setdefault(token, logprob)
    return TokenLogprobs(token=token, logprob=logprob, top=top)


@dataclass(frozen=True)
class GenerationRequest:
    """One judge prompt to complete ``n`` times."""

    system: str
    """System prompt (the wire format decides whether it is folded into the user turn)."""
    user: str
    """The judge format's filled template."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    n: int = 1
    """Number of independent samples."""
    assistant_prefix: str = ""
    """Text the judge has already 'written': generation continues after it (a forced verdict)."""
    attempt: int = 0
    """Re-sampling round (0 = first): stores key on it, so a retry gets fresh samples; backends ignore it."""
    deadline: float | None = None
    """Monotonic time by which a transport must have answered; None: its own timeout. Engines ignore it."""
    judge_format: str = "prometheus2"
    """The judge format that wrote the prompt (``JudgeFormat.name``): stores key on it; backends ignore it."""


def earliest(requests: Sequence[GenerationRequest]) -> float | None:
    """The earliest ``deadline`` of ``requests`` (None when none has one)."""
    return min((r.deadline for r in requests if r.deadline is not None), default=None)


DEFAULT_TOP_K = 20  # teacher forcing's alternatives per position: vLLM's default max_logprobs


@runtime_checkable
class ContinuationScorer(Protocol):
    """A backend that teacher-forces a given continuation (``capabilities.continuation_logprobs``)."""

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
    common = 0
    while common < min(len(prompt_ids), len(joint_ids)) and joint_ids[common] == prompt_ids[common]:
        common += 1
    return list(joint_ids[common:])


def with_continuation(request: GenerationRequest, continuation: str) -> GenerationRequest:
    """``request`` with ``continuation`` appended to its assistant prefix."""
    return dataclasses.replace(request, assistant_prefix=request.assistant_prefix + continuation)


@dataclass(frozen=True)
class Completion:
    """One sample returned by a backend."""

    text: str
    """Generated text (without the prompt and any assistant_prefix)."""
    logprobs: tuple[TokenLogprobs, ...] | None = None
    """Per generated token, when logprobs were requested."""
    finish_reason: str | None = None
    completion_tokens: int = 0


@dataclass(frozen=True)
class GenerationResult:
    """The ``n`` samples for one request, plus token accounting."""

    completions: tuple[Completion, ...]
    prompt_tokens: int = 0
    stored: bool = False
    """A judgment store answered it (``CachedBackend``): nothing was generated."""
    error: str | None = None
    """Why this request got no completions (unreachable, 5xx, timed out, rejected); it fails alone."""
    rejected: bool = False
    """With ``error``: the server rejected the request itself (HTTP 4xx): the item's fault, not retried."""


@dataclass(frozen=True, kw_only=True)
class BackendCapabilities:
    """What a backend declares it can do beyond the protocol's methods (every field given, none assumed)."""

    tokens_at_most_bytes: bool = setting(
        help="Its tokenizer never makes more tokens than UTF-8 bytes: the context check skips prompts that surely fit."
    )
    streams_results: bool = setting(
        help="``agenerate`` takes ``on_result(index, result)``, called as each result completes (a store saves it)."
    )
    thread_safe: bool = setting(help="Several tasks may call ``agenerate`` at once; else one call at a time.")
    continuation_logprobs: bool = setting(help="It teacher-forces (``acontinuation_logprobs``; SE-Cali needs it).")

    def __post_init__(self) -> None:
        check(self)


class BackendFingerprint(TypedDict):
    """What identifies the judge model behind a backend: the store's keys and a job's manifest, so its values
    never change (a change would orphan every stored judgment)."""

    name: str
    model: str | None
    """A hub id or folder (a loaded model: its ``str``); None when it has none or is not known yet."""
    wire: str | None


def make_fingerprint(name: str, model: object = None, wire: str | None = None) -> BackendFingerprint:
    """A backend's fingerprint: ``model`` as text (None stays None)."""
    return {"name": name, "model": None if model is None else str(model), "wire": wire}


@runtime_checkable
class Backend(Protocol):
    """What the judge needs from a model server or engine."""

    name: str
    capabilities: BackendCapabilities

    @property
    def fingerprint(self) -> BackendFingerprint: ...

    @property
    def gpu_memory_share(self) -> float | None:
        """The GPU share its in-process engine takes (another engine here must leave it); None when none."""
        ...

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Complete every request, in input order: one the transport fails gets a result with ``error``; a
        failure of the whole call raises ``BackendError``. Blocking work runs in the backend's worker thread."""
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
        """The tokenizer's special tokens (neutralised in judged texts); () when it is not here."""
        ...

    def close(self) -> None:
        """Release the engine/connections. Safe to call twice."""
        ...


def wire_format(name: str) -> WireFormat:
    """The wire format ``name``; an unknown one is a ``ConfigError``."""
    try:
        return get_wire_format(name)
    except UnknownNameError as e:
        raise ConfigError(str(e), "wire") from e


def api_key_of(given: str | None) -> str | None:
    """The API key of a judge server: ``given``, else ``$PROM_REWARD_API_KEY``, else ``$OPENAI_API_KEY``."""
    return given or os.environ.get("PROM_REWARD_API_KEY") or os.environ.get("OPENAI_API_KEY")


@dataclass(frozen=True)
class JudgeServer:
    """Where a judge server is (base URLs ending in ``/v1``), which model to ask (None: the first it lists) and
    the bearer token, as every request of a run asks it."""

    urls: tuple[str, ...]
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    """The bearer token (``api_key_of``: given, else the environment's)."""


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
        todo = [plan for plan in plans if plan[1]]  # an empty continuation has no positions
        forced = iter(self._forced(todo, top_k) if todo else [])
        return [next(forced) if size else () for _, size in plans]

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text the engine reads (wire format + assistant prefix)."""
        text = self.wire.render(request.system, request.user, self.tokenizer, system_role=self.system_role)
        return text + request.assistant_prefix

    def _ids(self, request: GenerationRequest) -> list[int]:
        add = not self.wire.uses_chat_template  # a chat template already wrote BOS
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
