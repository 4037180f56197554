"""The ``openai`` backend reports each request's failure as a value: a request that fails (a 5xx, a 4xx, a hung
call cut at its ``deadline``) gets a result with its ``error`` after one attempt and its batch-mates keep their
answers; nothing here retries or waits an outage out (that is ``prom_reward.rewards.outage``, the one owner of
retries). Real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.errors import BackendError

OK = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fine. [RESULT] 4"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4},
}


def req(user: str, **kw) -> GenerationRequest:
    return GenerationRequest("sys", user, sampling=SamplingConfig(max_tokens=8), **kw)


def server(url: str, **kw) -> OpenAIServer:
    return OpenAIServer(url, model="judge", system_role=True, **kw)


def test_each_request_fails_alone_with_its_reason(fake_server):
    def chat(k, body):
        user = json.dumps(body)
        if "down" in user:
            return 503, {"error": "engine loading"}
        if "rejected" in user:
            return 400, {"error": "prompt too long"}
        return 200, OK

    srv = fake_server({"/v1/chat/completions": chat})
    good, down, rejected = server(srv.url).generate([req("good"), req("down"), req("rejected")])
    assert good.error is None and good.completions[0].text == "Fine. [RESULT] 4"
    assert not down.completions and "HTTP 503" in down.error and "engine loading" in down.error and not down.rejected
    assert not rejected.completions and "HTTP 400" in rejected.error and rejected.rejected


def test_a_request_deadline_cuts_a_hung_call(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: None})  # never answers
    start = time.monotonic()
    [res] = server(srv.url).generate([req("q", deadline=time.monotonic() + 0.5)])
    took = time.monotonic() - start
    assert "Timeout" in res.error and 0.4 < took < 2.5, took
    assert len(srv.bodies("/v1/chat/completions")) == 1


def test_the_transport_makes_one_attempt_per_request_and_retries_nothing(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (503, {}) if k <= 2 else (200, OK)})
    backend = server(srv.url)
    [first] = backend.generate([req("q", deadline=time.monotonic() + 5)])
    assert "HTTP 503" in first.error and len(srv.bodies("/v1/chat/completions")) == 1
    [second] = backend.generate([req("q")])  # the next call (the outage policy's retry) is a new attempt
    assert "HTTP 503" in second.error and len(srv.bodies("/v1/chat/completions")) == 2
    [third] = backend.generate([req("q")])
    assert third.error is None and len(srv.bodies("/v1/chat/completions")) == 3


def test_a_batch_holds_only_the_bodies_of_the_calls_in_flight(fake_server, monkeypatch):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (time.sleep(0.01), (200, OK))[1]})
    backend = server(srv.url, max_concurrency=3)
    built, done, most = [0], [0], [0]
    make = backend._prompt_body

    def counted(r, sampling=None):
        built[0] += 1
        most[0] = max(most[0], built[0] - done[0])
        return make(r, sampling)

    monkeypatch.setattr(backend, "_prompt_body", counted)
    results = backend.generate(
        [req(f"q{i}") for i in range(20)], on_result=lambda i, r: done.__setitem__(0, done[0] + 1)
    )
    assert all(r.error is None for r in results) and built[0] == done[0] == 20
    assert most[0] <= 3, most[0]  # built once a slot is free, not all 20 up front
    assert sorted(b["messages"][1]["content"] for b in srv.bodies("/v1/chat/completions")) == sorted(
        f"q{i}" for i in range(20)
    )
    assert all(b["max_tokens"] == 8 and b["model"] == "judge" for b in srv.bodies("/v1/chat/completions"))


def test_a_deadline_already_passed_sends_nothing(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, OK)})
    [res] = server(srv.url).generate([req("q", deadline=time.monotonic() - 1)])
    assert "deadline passed before the judge was asked" in res.error and srv.bodies("/v1/chat/completions") == []


def _reply(content: bytes = b'"Good. [RESULT] 4"', extra: bytes = b"", usage: bytes = b'{"prompt_tokens": 3}') -> bytes:
    return (
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": %s}, "finish_reason": "stop"%s}], '
        b'"usage": %s}' % (content, extra, usage)
    )


def _logprobs(value: bytes) -> bytes:
    return b', "logprobs": {"content": [{"token": "4", "logprob": %s, "top_logprobs": []}]}' % value


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_reply(b'["Good. [RESULT] 4"]'), "message.content: expected a string, got list"),
        (_reply(b'{"text": "Good. [RESULT] 4"}'), "message.content: expected a string, got dict"),
        (_reply(b"4"), "message.content: expected a string, got int"),
        (_reply(b'"Good \\udcff. [RESULT] 4"'), "holds a lone surrogate"),
        (_reply(extra=b', "finish_reason": 7'), "finish_reason: expected a string, got 7"),
        (_reply(usage=b'{"prompt_tokens": Infinity}'), "usage.prompt_tokens: expected a token count >= 0, got inf"),
        (_reply(usage=b'{"prompt_tokens": 1e400}'), "usage.prompt_tokens: expected a token count"),
        (_reply(usage=b'{"completion_tokens": -3}'), "usage.completion_tokens: expected a token count >= 0, got -3"),
        (_reply(usage=b'{"prompt_tokens": NaN}'), "usage.prompt_tokens: expected a token count"),
        (_reply(extra=_logprobs(b"NaN")), "expected a log-probability (a number <= 0), got nan"),
        (_reply(extra=_logprobs(b"Infinity")), "expected a log-probability (a number <= 0), got inf"),
        (_reply(extra=_logprobs(b"3.5")), "expected a log-probability"),
        (b"[" * 100_000 + b"]" * 100_000, "RecursionError"),
        (_reply().replace(b'"index": 0', b'"index": 3'), "expected choices with index 0..0, got [3]"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_the_requests_malformed_reply_never_a_score(fake_server, body, reason):
    """HTTP 200 with JSON that is not a judge's answer (a text that is not a string, a count that is not one,
    a logprob that is NaN, JSON nested past the recursion limit) is that request's transport failure naming the
    URL and what was wrong: never a crash of the batch, never a text made from the junk (a list's repr holding
    ``[RESULT] 4`` was graded 4); its batch-mate keeps its answer."""
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, body if "bad" in json.dumps(b) else OK)})
    logprobs = GenerationRequest("sys", "bad", sampling=SamplingConfig(max_tokens=8, logprobs=2))
    bad, good = server(srv.url).generate([logprobs, req("ok")])
    assert not bad.completions and "malformed reply from " + srv.url in bad.error and reason in bad.error
    assert good.error is None and good.completions[0].text == "Fine. [RESULT] 4"


def test_a_reply_over_the_size_cap_is_not_read(fake_server, monkeypatch):
    """A reply larger than ``MAX_REPLY_BYTES`` (a server streaming gigabytes, or one announcing them) fails its
    request at once instead of filling memory."""
    from prom_reward.backends import _openai_http

    monkeypatch.setattr(_openai_http, "MAX_REPLY_BYTES", 2000)
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, _reply(b'"%s"' % (b"x" * 5000)))})
    [res] = server(srv.url).generate([req("q")])
    assert not res.completions and "is over 0 MiB (not read)" in res.error and srv.url in res.error


@pytest.mark.parametrize(
    "models",
    [b'{"data": [5]}', b'{"data": "abc"}', b'{"data": [{"id": "judge", "max_model_len": "abc"}]}', b"[]"],
)
def test_a_models_reply_of_the_wrong_shape_is_a_backend_error_naming_the_url(fake_server, models):
    """``GET /models`` answering junk (asked for the model id and the context length) is a ``BackendError``
    naming the URL, as for a server that is down (was a TypeError/AttributeError/ValueError traceback)."""
    srv = fake_server({"/v1/models": lambda k, b: (200, models), "/v1/chat/completions": lambda k, b: (200, OK)})
    for model in (None, "judge"):
        with pytest.raises(BackendError, match=rf"GET /models failed: malformed reply from {srv.url}/models"):
            asyncio.run(OpenAIServer(srv.url, model=model, system_role=True).acontext_length())


@pytest.mark.parametrize("option", ["timeout", "probe_interval"])
@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 0, -1])
def test_seconds_that_are_not_finite_and_positive_are_refused(option, seconds):
    """``timeout=inf`` failed every call with an OverflowError out of ``generate``; ``nan`` was taken (no timeout)."""
    from prom_reward.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"{option}: expected seconds > 0 \(finite\), got"):
        OpenAIServer("http://127.0.0.1:9/v1", **{option: seconds})


@pytest.mark.parametrize("status", [500, 400])
@pytest.mark.parametrize(
    ("body", "quoted"),
    [(b"[" * 100_000 + b"]" * 100_000, "[[[["), (b'{"detail": "engine \\ud800 died"}', "engine ? died")],
)
def test_an_error_reply_nested_too_deep_or_holding_a_lone_surrogate_is_quoted_safely(fake_server, status, body, quoted):
    """The server's error message is quoted in the request's error (which lands in a graded row's ``judge_error``):
    a body nested past the recursion limit was a RecursionError out of ``generate``, and a lone surrogate in it
    failed whatever wrote the row."""
    srv = fake_server({"/v1/chat/completions": lambda k, b: (status, body)})
    [res] = server(srv.url).generate([req("q")])
    assert f"HTTP {status}" in res.error and quoted in res.error and res.rejected == (status == 400)
    res.error.encode("utf-8")


@pytest.mark.parametrize("call", ["acontext_length", "acount_tokens", "agenerate"])
def test_a_hung_models_or_tokenize_call_ends_at_the_deadline(fake_server, call):
    """``GET /models`` (the model to ask, the context window) and ``/tokenize`` are cut at the caller's deadline,
    not only at the transport's timeout."""
    hung = fake_server({"/v1/models": lambda k, b: None, "/tokenize": lambda k, b: None})
    server = OpenAIServer(hung.url, timeout=60, system_role=True)
    deadline = time.monotonic() + 0.5
    request = GenerationRequest("S", "U", deadline=deadline)
    calls = {
        "acontext_length": lambda: server.acontext_length(deadline),
        "acount_tokens": lambda: server.acount_tokens([request], deadline),
        "agenerate": lambda: server.agenerate([request]),
    }
    start = time.monotonic()
    with pytest.raises(BackendError, match="GET /models.*Timeout"):
        asyncio.run(calls[call]())
    assert time.monotonic() - start < 5
    asyncio.run(server.aclose())
