"""The ``openai`` backend: one or more OpenAI-compatible servers (vLLM's api_server first of all), one concurrent
HTTP call per request that fails alone; server quirks (CPU seeds, greedy ``n > 1``, system roles) are in
docs/design-notes.md."""

from __future__ import annotations

import functools
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prom_reward.backends._openai_http import EndpointPool, HTTPBatch, gather_all
from prom_reward.backends._openai_wire import (
    context_of,
    model_ids,
    parse_prompt_logprobs,
    parse_reply,
    sampling_fields,
)
from prom_reward.backends._sessions import LoopSessions
from prom_reward.backends.base import (
    DEFAULT_TOP_K,
    BackendCapabilities,
    BackendFingerprint,
    GenerationRequest,
    GenerationResult,
    JudgeServer,
    TokenLogprobs,
    api_key_of,
    earliest,
    make_fingerprint,
    split_continuation,
    wire_format,
    with_continuation,
)
from prom_reward.backends.bridge import sync_method
from prom_reward.backends.vllm_options import teacher_forcing_kwargs
from prom_reward.declared import check, setting
from prom_reward.errors import BackendError, ConfigError, JudgeConfigError, ServerRejected
from prom_reward.format.wire import _PROBE_SYSTEM as _PROBE

log = logging.getLogger(__name__)
T = TypeVar("T")
OnResult = Callable[[int, GenerationResult], None]


def token_ids(reply: Any) -> list[int]:
    """The token ids of a ``/tokenize`` reply."""
    return list(reply["tokens"])


def is_http_url(url: str) -> bool:
    """An http(s) URL with a host, no whitespace and a valid port if any (not ``http://`` nor ``http://[::1/v1``)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0..65535
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in url)


@dataclass(frozen=True)
class ServerOptions:
    """How an ``OpenAIServer`` asks its servers: its keyword options besides ``wire`` and ``api_key``."""

    endpoint: str = setting("chat", choices=("chat", "completions"), help="``/chat/completions`` or ``/completions``.")
    system_role: bool | None = setting(None, help="Whether the chat template takes a system message; None asks.")
    max_concurrency: int = setting(64, ge=1, help="Most HTTP calls in flight per batch.")
    timeout: float = setting(600.0, gt=0, unit="seconds", note="finite", help="Per HTTP call, cut to its deadline.")
    eject_after: int = setting(3, ge=1, help="Consecutive failures that take a URL out of rotation.")
    probe_interval: float = setting(
        5.0, gt=0, unit="seconds", note="finite", help="Seconds before an out URL is probed (doubling while it fails)."
    )
    max_model_len: int | None = setting(None, ge=1, help="The model's context length; None: ``GET /models``'.")

    def __post_init__(self) -> None:
        check(self)


class OpenAIServer:
    """Backend for OpenAI-compatible servers: ``base_url`` one URL or several, each ending in ``/v1``; ``model``
    the served model id (None: the first ``GET /models`` lists); ``wire`` ``chat`` (messages, or the served chat
    template via ``/tokenize`` on ``completions``), ``inst`` or ``raw`` (completion text; ``inst`` needs
    ``endpoint="completions"``); ``api_key`` the bearer token (``api_key_of``); ``options``: ``ServerOptions``."""

    name = "openai"
    capabilities = BackendCapabilities(
        tokens_at_most_bytes=True,  # real tokenizers
        streams_results=True,  # generate() takes on_result
        thread_safe=True,  # one client serves concurrent reward batches
        continuation_logprobs=True,  # vLLM servers' prompt_logprobs
    )
    gpu_memory_share = None  # the engine is the server's

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str | None = None,
        *,
        wire: str = "chat",
        api_key: str | None = None,
        **options: Any,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls or not all(isinstance(u, str) and is_http_url(u) for u in urls):
            raise ConfigError(
                f"expected one or more 'http(s)://host:port/v1' URLs, got {base_url!r}; fix: give the judge's URL "
                "with its scheme and /v1",
                "base_url",
            )
        self.options = o = ServerOptions(**options)
        self.wire = wire_format(wire)
        if o.endpoint == "chat" and self.wire.name == "inst":
            raise ConfigError(
                "'inst' is literal completion text, which the chat endpoint cannot send; "
                "fix: use {endpoint} 'completions' with {wire} 'inst', or {wire} 'chat'",
                "wire",
                ("endpoint",),
            )
        self.base_urls = [u.rstrip("/") for u in urls]
        self.pool = EndpointPool(self.base_urls, eject_after=o.eject_after, probe_interval=o.probe_interval)
        self.model, self.endpoint, self.system_role = model, o.endpoint, o.system_role
        self._api_key = api_key_of(api_key)
        self._max_model_len, self._context_known = o.max_model_len, o.max_model_len is not None
        self._closed = False
        self._sessions = LoopSessions(api_key=self._api_key, timeout=float(o.timeout))
        self._path = "/chat/completions" if o.endpoint == "chat" else "/completions"

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its model as given, or as ``GET /models`` named it once asked (None before), and its wire."""
        return make_fingerprint(self.name, self.model, self.wire.name)

    @property
    def server(self) -> JudgeServer:
        """Where it sends its requests, with which model and key."""
        return JudgeServer(tuple(self.base_urls), self.model, self._api_key)

    def __repr__(self) -> str:
        return f"OpenAIServer({self.base_urls!r}, model={self.model!r}, endpoint={self.endpoint!r})"

    async def _model(self, b: HTTPBatch, *, context: bool = False) -> str:
        """The model id (given, else the first ``GET /models`` lists); ``context``: its context length too, from
        the same reply."""
        if self.model is None or (context and not self._context_known):

            def parse(data: Any) -> tuple[str | None, int | None]:  # a malformed reply: a BackendError naming the URL
                model = self.model or next(iter(model_ids(data)), None)
                return model, context_of(data, model) if model else None

            model, length = await b.call("GET", "/models", parse=parse)
            if model is None:
                raise BackendError(f"GET /models on {self.base_urls[0]} lists no model; pass model='<id>'")
            self.model = model
            if not self._context_known:
                self._max_model_len, self._context_known = length, True
        return self.model

    async def aserved_model(self, deadline: float | None = None) -> str:
        """The model id its requests ask for: the one given, else the first ``GET /models`` lists (asked once)."""
        return await self._batch(self._model, deadline)

    async def _system_role(self, b: HTTPBatch) -> bool:
        """Ask the server whether its chat template keeps a system message (cached)."""
        if self.system_role is None:
            probe = {
                "model": await self._model(b),
                "add_generation_prompt": True,
                "messages": [{"role": "system", "content": _PROBE}, {"role": "user", "content": "x"}],
            }
            try:
                tokens = await b.call("POST", "/tokenize", probe, root=True, parse=token_ids)
                back = {"model": self.model, "tokens": tokens}
                text = await b.call("POST", "/detokenize", back, root=True, parse=lambda d: str(d["prompt"]))
                self.system_role, why = _PROBE in text, "the served chat template keeps or drops it"
            except ServerRejected as e:  # 400: the template raised on the system role; 404: not vLLM
                why = "no /tokenize (not vLLM?)" if e.status in (404, 405) else f"the template rejects it ({e})"
                self.system_role = False
            folding = "" if self.system_role else "; folding the system prompt into the user turn"
            log.info("system role for %s: %s (%s)%s", self.model, self.system_role, why, folding)
        return self.system_role

    def _prompt_body(self, r: GenerationRequest, sampling: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The model and prompt of ``r`` (the model known), then the ``sampling`` fields: chat messages (the chat
        endpoint, or ``/tokenize`` for the served chat template) or the rendered text."""
        if self.endpoint == "chat" or self.wire.uses_chat_template:
            role = bool(self.system_role) and self.wire.name == "chat"
            messages = self.wire.messages(r.system, r.user, system_role=role)
            body: dict[str, Any] = {"model": self.model, "messages": messages}
            if r.assistant_prefix:
                messages.append({"role": "assistant", "content": r.assistant_prefix})
                body.update(continue_final_message=True, add_generation_prompt=False)
        else:
            body = {"model": self.model, "prompt": self.wire.render(r.system, r.user) + r.assistant_prefix}
        body.update(sampling or ())
        return body

    async def _tokenize(
        self, b: HTTPBatch, i: int, r: GenerationRequest, parse: Callable[[Any], T], deadline: float | None = None
    ) -> T:
        """``/tokenize`` (at the server root: a vLLM extension) of the prompt of request ``i``, read by ``parse``."""
        return await b.call(
            "POST", "/tokenize", self._prompt_body(r), index=i, root=True, parse=parse, deadline=deadline
        )

    async def _batch(self, work: Callable[[HTTPBatch], Awaitable[T]], deadline: float | None = None) -> T:
        """``work`` on one ``HTTPBatch`` of this loop's session, every call bounded by ``deadline``."""
        if self._closed:
            raise BackendError("this OpenAIServer was closed; build a new one")
        b = HTTPBatch(self.pool, self._sessions.get(), self.options.max_concurrency, self.options.timeout, deadline)
        try:
            return await work(b)
        finally:
            await b.aclose()

    async def _each(
        self, one: Callable[[HTTPBatch, int, Any], Awaitable[T]], items: Sequence[Any], deadline: float | None
    ) -> list[T]:
        """``one(batch, i, item)`` for every item concurrently on one prepared batch, in input order."""
        if not items:
            return []

        async def work(b: HTTPBatch) -> list[T]:
            await self._model(b)  # the model id and the system-role question once, before the fan-out
            if self.wire.name == "chat":
                await self._system_role(b)
            return await gather_all(one(b, i, item) for i, item in enumerate(items))

        return await self._batch(work, deadline)

    async def agenerate(
        self, requests: Sequence[GenerationRequest], *, on_result: OnResult | None = None
    ) -> list[GenerationResult]:
        """Complete every request concurrently, in input order, calling ``on_result(i, result)`` as each completes;
        a failed request (one attempt) gets its ``error`` (``rejected`` for a 4xx), the others their answers."""

        async def one(b: HTTPBatch, i: int, r: GenerationRequest) -> GenerationResult:
            k = 1 if r.sampling.temperature == 0 else r.n  # vLLM rejects greedy n > 1: ask one, repeat it n times
            endpoint = self.endpoint
            fields = sampling_fields(r.sampling, k, endpoint)
            try:
                body: Any = functools.partial(self._prompt_body, r, fields)  # made once a slot is free
                if endpoint == "completions" and self.wire.uses_chat_template:  # the server's chat template, as ids
                    ids = await self._tokenize(b, i, r, token_ids, r.deadline)
                    body = {"model": self.model, "prompt": ids, **fields}
                parse = functools.partial(parse_reply, endpoint=endpoint, sent_n=k, n=r.n, top_k=r.sampling.logprobs)
                res = await b.call("POST", self._path, body, index=i, parse=parse, deadline=r.deadline)
            except BackendError as e:  # a 4xx (ServerRejected): the request's own fault
                return GenerationResult((), error=str(e), rejected=isinstance(e, ServerRejected))
            if on_result is not None:
                on_result(i, res)
            return res

        return await self._each(one, requests, earliest(requests))

    generate = sync_method(agenerate)

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Per base URL: ``up``, ``in_flight``, ``requests``, ``failures``, ``ejections``, ``strikes``."""
        return self.pool.snapshot()

    async def acontinuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        """Teacher forcing on a vLLM server: prompt and prompt plus continuation through ``/tokenize``, then
        ``/completions`` of those ids with ``max_tokens=1`` and ``prompt_logprobs=top_k``."""
        if len(requests) != len(continuations):
            raise ConfigError(f"got {len(requests)} requests but {len(continuations)} continuations")

        async def one(b: HTTPBatch, i: int, pair: tuple[GenerationRequest, str]) -> tuple[TokenLogprobs, ...]:
            r, text = pair
            joint = await self._tokenize(b, i, with_continuation(r, text), token_ids)
            size = len(split_continuation(await self._tokenize(b, i, r, token_ids), joint))
            if size == 0:
                return ()
            body = {"model": self.model, "prompt": joint, **teacher_forcing_kwargs(top_k)}
            return await b.call(
                "POST", "/completions", body, index=i, parse=lambda d: parse_prompt_logprobs(d, joint, size, top_k)
            )

        return await self._each(one, list(zip(requests, continuations, strict=True)), deadline)

    async def acount_tokens(
        self, requests: Sequence[GenerationRequest], deadline: float | None = None
    ) -> list[int] | None:
        """Prompt tokens per request via ``/tokenize``; None when the server has none."""
        try:
            return await self._each(
                lambda b, i, r: self._tokenize(b, i, r, lambda d: int(d["count"])), requests, deadline
            )
        except ServerRejected as e:
            if e.status in (404, 405):
                return None
            raise

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        """``max_model_len`` of the served model from ``GET /models`` (vLLM), else None."""
        if not self._context_known:
            try:
                await self._batch(lambda b: self._model(b, context=True), deadline)
            except (ServerRejected, JudgeConfigError) as e:
                if e.status not in (404, 405):
                    raise
                self._max_model_len, self._context_known = None, True  # no /models (a wrong route fails generation)
        return self._max_model_len

    def special_tokens(self) -> tuple[str, ...]:
        """None known: the served tokenizer is not here (give ``PrometheusJudge(special_tokens=...)``)."""
        return ()

    def close(self) -> None:
        """Refuse further calls and close the HTTP sessions, each on its own loop. Safe twice."""
        self._closed = True
        self._sessions.close()

    async def aclose(self) -> None:
        """``close`` from async code: the running loop's session is closed before this returns."""
        self._closed = True
        await self._sessions.aclose()
