"""Request bodies and reply parsing for ``OpenAIServer`` (pure functions); a reply without what is expected raises
``MalformedReply`` (or the ``KeyError``, ``TypeError`` ... of a shape not looked for: ``HTTPBatch.call`` says both)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from prom_reward.backends.base import Completion, GenerationResult, TokenLogprobs, position
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.vllm_options import sampling_kwargs
from prom_reward.errors import JudgeConfigError, ServerRejected
from prom_reward.format.templates import unicode_problem

MAX_TOP_LOGPROBS = 20
"""The most ``top_logprobs`` OpenAI (and vLLM by default) accept."""


class MalformedReply(ValueError):
    """A 2xx reply whose JSON does not have the expected shape."""


@functools.lru_cache(maxsize=256)
def sampling_fields(s: SamplingConfig, n: int, endpoint: str) -> Mapping[str, Any]:
    """The sampling part of a request body (read-only, made once per options): the in-process engine's
    ``vllm_options.sampling_kwargs`` with those left unset dropped (``seed`` above all: a CPU vLLM server must
    never get one)."""
    body = {k: v for k, v in sampling_kwargs(s, n, per_request_seed=True).items() if v is not None}
    if s.logprobs is not None and endpoint == "chat":  # the sampled token comes first in vLLM's list: ask one more
        body["logprobs"] = True
        body["top_logprobs"] = min(s.logprobs + 1, MAX_TOP_LOGPROBS)
    return body


def _logprob(value: Any) -> float:
    """A log-probability from a reply: a number, not NaN, not above 0 (rounding aside); -inf is one."""
    lp = float(value)
    if math.isnan(lp) or lp > 1e-3:
        raise MalformedReply(f"expected a log-probability (a number <= 0), got {value!r}")
    return lp


def _count(usage: Any, key: str) -> int:
    """``usage[key]``: a token count (a whole number >= 0; absent or null: 0)."""
    value = usage.get(key) or 0
    try:
        count = int(value)
    except (ValueError, TypeError, OverflowError):
        count = -1
    if isinstance(value, bool) or count < 0:
        raise MalformedReply(f"usage.{key}: expected a token count >= 0, got {value!r}")
    return count


def _text(value: Any, where: str) -> str:
    """A completion's text: a string (null: empty) of valid Unicode (no lone surrogate)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReply(f"{where}: expected a string, got {type(value).__name__} {json.dumps(value)[:80]}")
    problem = unicode_problem(value)
    if problem is not None:
        raise MalformedReply(f"{where}: {problem}")
    return value


def _position(token: str, logprob: float, alternatives: list[tuple[str, float]], k: int) -> TokenLogprobs:
    """Keep the ``k`` most likely alternatives, then make sure the sampled token is there."""
    return position(token, logprob, sorted(((str(t), _logprob(v)) for t, v in alternatives), key=lambda a: -a[1])[:k])


def _chat_logprobs(lp: Any, k: int) -> tuple[TokenLogprobs, ...]:
    out = []
    for pos in lp["content"] or []:
        alts = [(a["token"], a["logprob"]) for a in pos.get("top_logprobs") or []]
        out.append(_position(str(pos["token"]), _logprob(pos["logprob"]), alts, k))
    return tuple(out)


def _completion_logprobs(lp: Any, k: int) -> tuple[TokenLogprobs, ...]:
    tokens, values = lp["tokens"], lp["token_logprobs"]
    tops = lp.get("top_logprobs") or [None] * len(tokens)
    if not len(tokens) == len(values) == len(tops):
        raise MalformedReply(f"logprobs lists differ in length: {len(tokens)}, {len(values)}, {len(tops)}")
    return tuple(
        _position(str(t), _logprob(v), list((top or {}).items()), k)
        for t, v, top in zip(tokens, values, tops, strict=True)
    )


def parse_reply(data: Any, endpoint: str, *, sent_n: int, n: int, top_k: int | None = None) -> GenerationResult:
    """One reply as a ``GenerationResult`` of ``n`` completions in ``index`` order, ``top_k`` alternatives each."""
    k = MAX_TOP_LOGPROBS if top_k is None else top_k
    choices = data["choices"]
    if len(choices) != 1:  # (one choice: nothing to sort)
        choices = sorted(choices, key=lambda c: int(c["index"]))
    usage = data.get("usage") or {}
    if len(choices) != sent_n:
        raise MalformedReply(f"expected {sent_n} choices, got {len(choices)}")
    if [int(c["index"]) for c in choices] != list(range(sent_n)):
        raise MalformedReply(f"expected choices with index 0..{sent_n - 1}, got {[c['index'] for c in choices]}")
    completions = []
    for c in choices:
        text = c["message"].get("content") if endpoint == "chat" else c["text"]
        if not (type(text) is str and text.isascii()):  # (ASCII text holds no lone surrogate)
            where = f"choices[{c['index']}]." + ("message.content" if endpoint == "chat" else "text")
            text = _text(text, where)
        finish = c.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise MalformedReply(f"choices[{c['index']}].finish_reason: expected a string, got {finish!r}")
        lp = c.get("logprobs")
        if lp is None:
            logprobs, count = None, int(round(_count(usage, "completion_tokens") / sent_n))
        else:
            logprobs = _chat_logprobs(lp, k) if endpoint == "chat" else _completion_logprobs(lp, k)
            count = len(logprobs)
        completions.append(Completion(text, logprobs, finish, count))
    prompt_tokens = _count(usage, "prompt_tokens")
    if sent_n != n:  # greedy: every sample is the same
        completions = completions * n
    return GenerationResult(tuple(completions), prompt_tokens=prompt_tokens)


def parse_prompt_logprobs(data: Any, ids: list[int], size: int, k: int) -> tuple[TokenLogprobs, ...]:
    """The last ``size`` positions of a vLLM ``/completions`` reply's ``prompt_logprobs`` (prompt ``ids``) as
    ``TokenLogprobs`` with the ``k`` most likely alternatives."""
    positions = data["choices"][0]["prompt_logprobs"]
    if not isinstance(positions, list) or len(positions) != len(ids):
        got = len(positions) if isinstance(positions, list) else type(positions).__name__
        raise MalformedReply(f"expected prompt_logprobs for {len(ids)} prompt tokens, got {got}")
    out = []
    for j in range(len(ids) - size, len(ids)):
        entry = positions[j] or {}
        chosen = entry.get(str(ids[j]))
        if chosen is None:
            raise MalformedReply(f"prompt_logprobs at position {j} lacks the prompt token {ids[j]}")
        alts = [(str(v.get("decoded_token")), float(v["logprob"])) for v in entry.values()]
        out.append(_position(str(chosen.get("decoded_token")), _logprob(chosen["logprob"]), alts, k))
    return tuple(out)


def model_ids(data: Any) -> list[str]:
    """The model ids a ``GET /models`` reply lists."""
    return [str(card["id"]) for card in data["data"]]


def context_of(data: Any, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a ``GET /models`` reply (vLLM's), None when it is not given."""
    for card in data["data"]:
        if card["id"] == model:
            value = card.get("max_model_len")
            if not value:
                return None
            if isinstance(value, bool) or int(value) <= 0:
                raise MalformedReply(f"max_model_len of {model}: expected a token count > 0, got {value!r}")
            return int(value)
    return None


def error_text(body: bytes, limit: int = 500) -> str:
    """The server's own message of an error reply (``error.message``, ``detail``), else the body's start; valid
    Unicode (a lone surrogate as "?")."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit
        text = body.decode("utf-8", "replace")[:limit] or "(empty body)"
    else:
        text = json.dumps(data)[:limit]
        if isinstance(data, dict):
            err = data.get("error")
            found = err.get("message") if isinstance(err, dict) else None
            found = found or next((data[key] for key in ("detail", "message", "error") if data.get(key)), None)
            text = str(found)[:limit] if found else text
    return text.encode("utf-8", "replace").decode("utf-8")


def rejection(
    what: str, base: str, full: str, status: int, body: bytes, *, root: bool
) -> ServerRejected | JudgeConfigError:
    """The error of a 4xx reply (not 429): ``JudgeConfigError`` when no request is at fault (401/403, a 404 on an
    API path: a model not served or a URL without ``/v1``), else ``ServerRejected`` (a root 404: no ``/tokenize``)."""
    text = error_text(body)
    if status in (401, 403):
        said = (
            f"was refused (HTTP {status}: {text}): the server wants another API key; fix: set PROM_REWARD_API_KEY "
            "(or OPENAI_API_KEY, or the judge option api_key) to the server's key"
        )
    elif status == 404 and not root and "model" in text.lower():
        said = (
            f"answered HTTP 404 ({text}): the server does not serve that model; fix: set --model / "
            f"PROM_REWARD_MODEL / the judge option model to one that GET {base}/models lists, or leave it unset "
            "to use the first"
        )
    elif status == 404 and not root:
        said = (
            f"answered HTTP 404 at {full} ({text}): that URL is not the server's OpenAI-compatible API; fix: give "
            "the API base URL, which ends in /v1 (e.g. http://host:8000/v1), in --server / PROM_REWARD_SERVER / "
            "the judge option base_url"
        )
    else:
        return ServerRejected(
            f"{what}: the server at {full} rejected it (HTTP {status}): {text}; fix the request or the server options",
            status,
        )
    return JudgeConfigError(f"judge {base}: {what} {said}", url=base, status=status)
