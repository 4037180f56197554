"""The ``openai`` backend against a real vLLM OpenAI-compatible server (tiny random Llama on CPU),
plus small local HTTP servers (real sockets on 127.0.0.1) that misbehave on purpose."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import re
import time
from pathlib import Path
from typing import Any

import pytest

from prom_reward.backends import make_backend
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.errors import BackendError, ConfigError
from tests.fakes import Reply, chat_reply, free_port

pytestmark = pytest.mark.integration

SAMPLE = SamplingConfig(max_tokens=6, logprobs=5)
GREEDY = SamplingConfig(temperature=0.0, max_tokens=8, repetition_penalty=1.0)


def batch(n: int = 2, sampling: SamplingConfig = SAMPLE) -> list[GenerationRequest]:
    """Six requests whose prompts grow by one word each, so prompt_tokens reveals the order."""
    return [GenerationRequest("You judge.", "word " * (i + 1), sampling=sampling, n=n) for i in range(6)]


def special_tokens(model_dir: Path) -> set[str]:
    """The tokenizer's special added tokens: vLLM leaves them out of the text (skip_special_tokens)."""
    added = json.loads((model_dir / "tokenizer.json").read_text())["added_tokens"]
    return {a["content"] for a in added if a["special"]}


# -- the real vLLM server ----------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_batch_n2_logprobs_in_order(vllm_server: str, tiny_model_dir: Path, endpoint: str):
    server = OpenAIServer(vllm_server, endpoint=endpoint)
    reqs = batch()
    results = server.generate(reqs)
    assert server.model == str(tiny_model_dir)  # model=None: first id from GET /models
    counts = asyncio.run(server.acount_tokens(reqs))
    assert [r.prompt_tokens for r in results] == counts
    assert counts == sorted(counts) and len(set(counts)) == 6  # input order preserved
    specials = special_tokens(tiny_model_dir)
    assert "<issue_comment>" in specials  # the tokenizer the check relies on
    for res in results:
        assert len(res.completions) == 2
        for c in res.completions:
            assert c.finish_reason in ("stop", "length") and isinstance(c.text, str)
            assert c.logprobs is not None and len(c.logprobs) == c.completion_tokens > 0
            # special tokens (sampled now and then from a random model) are in logprobs, not in the text
            joined = "".join(p.token for p in c.logprobs if p.token not in specials)
            if joined != c.text:  # a byte-fallback token that splits a UTF-8 character decodes to U+FFFD alone
                assert "\ufffd" in joined + c.text and joined.replace("\ufffd", "") == c.text.replace("\ufffd", "")
            for p in c.logprobs:
                assert p.token in p.top and p.top[p.token] == p.logprob and p.logprob <= 0.0
                assert 1 <= len(p.top) <= 6 and all(v <= 0.0 for v in p.top.values())
    server.close()
    server.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        server.generate(reqs)


def test_both_endpoints_agree_on_logprobs(vllm_server: str):
    """Same prompt tokens and the same top-5 at the first position (greedy: the sampled token is the best)."""
    req = [GenerationRequest("S", "compare", sampling=SamplingConfig(temperature=0.0, max_tokens=1, logprobs=5))]
    chat = OpenAIServer(vllm_server).generate(req)[0].completions[0]
    comp = OpenAIServer(vllm_server, endpoint="completions").generate(req)[0].completions[0]
    assert chat.text == comp.text and chat.logprobs[0].logprob == max(chat.logprobs[0].top.values())
    a, b = chat.logprobs[0].top, comp.logprobs[0].top
    assert set(a) == set(b) and 4 <= len(a) <= 5  # 5 ids; some may decode to the same text
    assert all(abs(a[t] - b[t]) < 1e-3 for t in a)


def test_system_role_detected_false_and_forcing_true_is_rejected(vllm_server: str):
    server = OpenAIServer(vllm_server)
    [res] = server.generate([GenerationRequest("SYS", "USER", sampling=SamplingConfig(max_tokens=2))])
    assert server.system_role is False  # the Mistral-style template raises on a system message
    assert len(res.completions) == 1
    forced = OpenAIServer(vllm_server, system_role=True)
    start = time.monotonic()
    results = forced.generate([GenerationRequest("SYS", "USER"), GenerationRequest("SYS", "USER2")])
    assert all(r.rejected and not r.completions for r in results)  # each request fails alone, as a value
    msg = results[1].error
    assert "HTTP 400" in msg and "no system role" in msg and vllm_server in msg and "request 1" in msg
    assert time.monotonic() - start < 10  # a 4xx is not retried


def test_assistant_prefix_continues_on_both_endpoints(vllm_server: str, tiny_model_dir: Path):
    from transformers import AutoTokenizer

    prefix = "Feedback: fine. [RESULT] "
    req = GenerationRequest("SYS", "Grade this.", sampling=GREEDY, assistant_prefix=prefix)
    chat = OpenAIServer(vllm_server)
    comp = OpenAIServer(vllm_server, endpoint="completions")
    a, b = chat.generate([req])[0], comp.generate([req])[0]
    # the same continuation as plain text completion of "<rendered chat template> + prefix"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = (
        tok.apply_chat_template(
            [{"role": "user", "content": "SYS\n\nGrade this."}], tokenize=False, add_generation_prompt=True
        )
        + prefix
    )
    raw = OpenAIServer(vllm_server, endpoint="completions", wire="raw")
    c = raw.generate([GenerationRequest("", text, sampling=GREEDY)])[0]
    assert a.completions[0].text == b.completions[0].text == c.completions[0].text
    assert a.prompt_tokens == b.prompt_tokens == c.prompt_tokens == asyncio.run(chat.acount_tokens([req]))[0]
    plain = asyncio.run(chat.acount_tokens([GenerationRequest("SYS", "Grade this.")]))[0]
    assert a.prompt_tokens > plain  # the prefix is part of the prompt
    # greedy is deterministic, and n > 1 greedy (which vLLM refuses) repeats the one sample
    again = chat.generate([GenerationRequest("SYS", "Grade this.", sampling=GREEDY, assistant_prefix=prefix, n=3)])
    assert [x.text for x in again[0].completions] == [a.completions[0].text] * 3


def test_inst_wire_on_completions_and_context_length(vllm_server: str):
    server = make_backend("openai", base_url=vllm_server, endpoint="completions", wire="inst")
    reqs = [GenerationRequest("SYS", "USER", sampling=SamplingConfig(max_tokens=3), n=2)]
    [res] = server.generate(reqs)
    assert res.prompt_tokens == asyncio.run(server.acount_tokens(reqs))[0] and len(res.completions) == 2
    assert asyncio.run(server.acontext_length()) == 4096
    assert asyncio.run(OpenAIServer(vllm_server).acontext_length()) == 4096


def test_sync_generate_inside_a_running_loop_and_async_core(vllm_server: str):
    server = OpenAIServer(vllm_server)
    reqs = batch(n=1, sampling=SamplingConfig(max_tokens=2))

    async def main() -> tuple[Any, Any]:
        return await server.agenerate(reqs), server.generate(reqs[:2])  # sync call inside a loop

    got, nested = asyncio.run(main())
    assert [r.prompt_tokens for r in got][:2] == [r.prompt_tokens for r in nested]
    clone = pickle.loads(pickle.dumps(server))  # a copy holds no session: it makes its own
    assert len(copy.deepcopy(clone).generate(reqs[:1])) == 1


def test_two_urls_one_dead_the_failed_requests_asked_again_go_to_the_other(vllm_server: str):
    dead = f"http://127.0.0.1:{free_port()}/v1"  # a closed port: connection refused
    server = OpenAIServer([dead, vllm_server], timeout=30)
    start = time.monotonic()
    reqs = batch(n=2, sampling=SamplingConfig(max_tokens=3))
    for _ in range(3):  # the call's preparation (GET /models, /tokenize) may go to the dead URL first: it fails whole
        try:
            results = server.generate(reqs)
            break
        except BackendError as e:
            assert dead.removesuffix("/v1") in str(e) and "Connect" in str(e)
    failed = [i for i, r in enumerate(results) if r.error]
    assert server.endpoint_stats()[dead]["failures"] >= 1  # the dead URL was tried, by the preparation or a request
    assert all(dead in results[i].error and "Connect" in results[i].error for i in failed)
    assert all(len(r.completions) == 2 for r in results if not r.error)  # the live URL's answers are kept
    again = server.generate([reqs[i] for i in failed])  # what the outage policy does: ask again for those
    assert all(r.error is None and len(r.completions) == 2 for r in again)  # on the URL that did not fail
    assert time.monotonic() - start < 60


# -- misbehaving servers (tests/fakes.py) ---------------------------------------------------
def fast(url: str | list[str], **kw: Any) -> OpenAIServer:
    return OpenAIServer(url, model="fake", system_role=False, **kw)


@pytest.mark.parametrize("status", [500, 429])
def test_a_500_or_429_is_the_requests_transport_error_and_the_next_call_is_answered(fake_server, status: int):
    srv = fake_server(
        {
            "/v1/chat/completions": lambda k, b: (
                (status, {"error": {"message": "busy"}}) if k == 1 else (200, chat_reply(b["n"]))
            )
        }
    )
    backend = fast(srv.url)
    [failed] = backend.generate([GenerationRequest("S", "U", n=2)])
    assert not failed.completions and not failed.rejected
    assert f"HTTP {status}" in failed.error and "busy" in failed.error
    [res] = backend.generate([GenerationRequest("S", "U", n=2)])  # asked again (the outage policy's call)
    assert [c.text for c in res.completions] == ["Good. [RESULT] 4 #0", "Good. [RESULT] 4 #1"]  # by index
    assert [c.completion_tokens for c in res.completions] == [3, 3] and res.prompt_tokens == 7
    assert len(srv.bodies("/v1/chat/completions")) == 2


def test_the_request_body_maps_sampling(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, chat_reply(b["n"]))})
    s = SamplingConfig(temperature=0.7, top_p=0.8, max_tokens=5, stop=("END",))
    fast(srv.url).generate(
        [
            GenerationRequest("S", "U", sampling=s, n=2),
            GenerationRequest("S", "U", sampling=SamplingConfig(top_k=5, seed=11)),
        ]
    )
    first, second = sorted(srv.bodies("/v1/chat/completions"), key=lambda b: b["max_tokens"])
    assert first["messages"] == [{"role": "user", "content": "S\n\nU"}]  # folded
    assert first["n"] == 2 and first["temperature"] == 0.7 and first["top_p"] == 0.8
    assert first["stop"] == ["END"] and first["repetition_penalty"] == 1.03
    assert "seed" not in first and "top_k" not in first and "logprobs" not in first  # no seed unless asked
    assert second["seed"] == 11 and second["top_k"] == 5


@pytest.mark.parametrize("mode", ["500", "garbage", "hang", "refused"])
def test_failures_are_reported_per_request_naming_the_url(fake_server, mode: str):
    replies: dict[str, Reply] = {
        "500": lambda k, b: (500, {"error": {"message": "engine died"}}),
        "garbage": lambda k, b: (200, b"this is not json{"),
        "hang": lambda k, b: None,
        "refused": lambda k, b: (200, {}),
    }
    srv = fake_server({"/v1/chat/completions": replies[mode]})
    url = srv.url if mode != "refused" else f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    [res] = fast(url, timeout=1.0).generate([GenerationRequest("S", "U")])
    msg = res.error
    assert not res.completions and not res.rejected
    assert url in msg and "request 0" in msg
    assert {"500": "engine died", "garbage": "malformed", "hang": "Timeout", "refused": "Connect"}[mode] in msg
    assert time.monotonic() - start < 4  # one attempt, cut at the 1 s timeout


def test_4xx_is_not_retried_and_quotes_the_server(fake_server):
    ok = {"choices": [{"index": 0, "text": " fine", "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}
    srv = fake_server(
        {
            "/v1/completions": lambda k, b: (
                (400, {"error": {"message": "max_tokens too large"}}) if b["prompt"] == "b" else (200, ok)
            )
        }
    )
    server = fast(srv.url, endpoint="completions", wire="raw")
    a, b = server.generate([GenerationRequest("S", "a"), GenerationRequest("S", "b")])
    assert a.completions[0].text == " fine" and a.error is None  # its batch-mate's rejection does not touch it
    assert b.rejected and re.search(r"request 1.*HTTP 400.*max_tokens too large", b.error)
    assert len(srv.calls) == 2  # one call per request, none retried
    assert server.generate([GenerationRequest("S", "a")])[0].completions[0].text == " fine"


def test_system_role_detection_protocol(fake_server):
    """A server whose template keeps the system probe gets system+user; one without /tokenize folds."""
    keeps = fake_server(
        {
            "/tokenize": lambda k, b: (200, {"count": 3, "tokens": [1, 2, 3], "max_model_len": 99}),
            "/detokenize": lambda k, b: (200, {"prompt": "<sys>PROM_REWARD_SYSTEM_PROBE</sys>x"}),
            "/v1/chat/completions": lambda k, b: (200, chat_reply()),
        }
    )
    server = OpenAIServer(keeps.url, model="fake")
    server.generate([GenerationRequest("S", "U")])
    assert server.system_role is True
    assert keeps.bodies("/v1/chat/completions")[0]["messages"] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
    ]
    assert asyncio.run(server.acount_tokens([GenerationRequest("S", "U")])) == [3]
    bare = fake_server({"/v1/chat/completions": lambda k, b: (200, chat_reply())})
    server = OpenAIServer(bare.url, model="fake")
    server.generate([GenerationRequest("S", "U")])
    assert server.system_role is False
    assert bare.bodies("/v1/chat/completions")[0]["messages"] == [{"role": "user", "content": "S\n\nU"}]
    assert (
        asyncio.run(server.acount_tokens([GenerationRequest("S", "U")])) is None
        and asyncio.run(server.acontext_length()) is None
    )


def test_options_are_validated():
    with pytest.raises(ConfigError, match="chat, completions"):
        OpenAIServer("http://x/v1", endpoint="responses")
    with pytest.raises(ConfigError, match="chat, inst, raw"):
        OpenAIServer("http://x/v1", wire="mistral")
    with pytest.raises(ConfigError, match="^wire: .*fix: use endpoint 'completions' with wire 'inst'"):
        OpenAIServer("http://x/v1", wire="inst")
    with pytest.raises(ConfigError, match="http"):
        OpenAIServer("localhost:8000")
    with pytest.raises(ConfigError, match="max_concurrency"):
        OpenAIServer("http://x/v1", max_concurrency=0)
    with pytest.raises(ConfigError, match="timeout"):
        OpenAIServer("http://x/v1", timeout=0)


def test_failing_url_is_taken_out_across_calls_and_probed_back_in(fake_server):
    healthy = {"sick": True}

    def sick_chat(k: int, b: dict) -> tuple[int, Any]:
        return (500, {"error": {"message": "CUDA error"}}) if healthy["sick"] else (200, chat_reply(b["n"]))

    sick = fake_server(
        {"/v1/chat/completions": sick_chat, "/health": lambda k, b: (503, {}) if healthy["sick"] else (200, {})}
    )
    good = fake_server({"/v1/chat/completions": lambda k, b: (200, chat_reply(b["n"]))})
    server = fast([sick.url, good.url], eject_after=2, probe_interval=0.3, max_concurrency=1)
    reqs = [GenerationRequest("S", f"U{i}") for i in range(8)]
    deadline = time.monotonic() + 10
    while server.endpoint_stats()[sick.url]["up"] and time.monotonic() < deadline:
        results = server.generate(reqs)
        failed = [r for r in results if r.error]
        assert all(sick.url in r.error and "CUDA error" in r.error for r in failed)  # each failure names its URL
        assert len(failed) <= 1  # after its failure the sick URL gets no call while the good one is clean
        time.sleep(0.35)  # past the window: the sick URL is tried again
    stats = server.endpoint_stats()
    assert stats[sick.url]["up"] is False and stats[sick.url]["ejections"] == 1
    assert len(sick.bodies("/v1/chat/completions")) == 2  # taken out after 2 failures in a row
    assert all(r.error is None for r in server.generate(reqs))  # out: every request goes to the good URL
    assert len(sick.bodies("/v1/chat/completions")) == 2 and not server.endpoint_stats()[sick.url]["up"]
    healthy["sick"] = False
    time.sleep(0.7)  # past the probe interval (doubled by a failed probe at most once)
    deadline = time.monotonic() + 10
    while not server.endpoint_stats()[sick.url]["up"] and time.monotonic() < deadline:
        server.generate(reqs[:2])  # a call lets the due probe run
        time.sleep(0.2)
    assert server.endpoint_stats()[sick.url]["up"], "the recovered server was never probed back in"
    assert any(p == "/health" for p, _ in sick.calls)
    before = len(sick.bodies("/v1/chat/completions"))
    server.generate(reqs)
    assert len(sick.bodies("/v1/chat/completions")) - before >= 3  # back in rotation (8 calls over 2 URLs)


def test_error_names_the_url_taken_out(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (500, {"error": {"message": "down"}})})
    server = fast(srv.url, eject_after=2)
    [first] = server.generate([GenerationRequest("S", "U")])
    assert "Taken out" not in first.error
    [second] = server.generate([GenerationRequest("S", "U")])
    assert "Taken out after repeated failures: " + srv.url in second.error


def test_on_result_reports_each_request_as_it_completes(fake_server):
    srv = fake_server({"/v1/chat/completions": lambda k, b: (200, chat_reply(b["n"]))})
    seen: list[tuple[int, str]] = []
    reqs = [GenerationRequest("S", f"U{i}", n=i + 1) for i in range(5)]
    results = fast(srv.url).generate(reqs, on_result=lambda i, r: seen.append((i, len(r.completions))))
    assert sorted(seen) == [(i, i + 1) for i in range(5)]
    assert [len(r.completions) for r in results] == [1, 2, 3, 4, 5]
