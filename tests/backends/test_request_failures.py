"""The ``openai`` backend reports each request's failure as a value: a request that fails (a 5xx, a 4xx, a hung
call cut at its ``deadline``) gets a result with its ``error`` after one attempt and its batch-mates keep their
answers; nothing here retries or waits an outage out (that is ``prom_reward.rewards.outage``, the one owner of
retries). Real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import time

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig

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


def test_a_deadline_already_passed_sends_nothing(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, OK)})
    [res] = server(srv.url).generate([req("q", deadline=time.monotonic() - 1)])
    assert "deadline passed before the judge was asked" in res.error and srv.bodies("/v1/chat/completions") == []
