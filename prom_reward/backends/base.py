"""The backend protocol: generate texts (and token logprobs) for a batch of judge prompts, each call async and
bounded by a deadline; what a backend can do is declared in ``capabilities``."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, runtime_checkable

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, UnknownNameError
from prom_reward.format.wire import WireFormat, get_wire_format


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
