"""The in-process engine and a served judge render the same prompt tokens: both run with the explicit
``tokenizer_mode`` of ``VLLMOptions`` (the session servers are started with ``prom-reward serve``'s
command line), on the tiny model (a Mistral-style template without a system role) and on SmolLM2
(ChatML, with one). Real vLLM engine and server on CPU."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.format.render import render_absolute, render_relative
from prom_reward.format.templates import ABS_SYSTEM_PROMPT, REL_SYSTEM_PROMPT

pytestmark = pytest.mark.integration

ONE_TOKEN = SamplingConfig(temperature=0.0, max_tokens=1)


def _requests() -> list[GenerationRequest]:
    absolute = render_absolute(
        "Name a prime number.", "7 is prime: its only divisors are 1 and 7.", "helpfulness", reference_answer="2"
    )
    relative = render_relative("Say hi.", "Hello there!", "hey", "helpfulness")
    return [
        GenerationRequest(ABS_SYSTEM_PROMPT, absolute, sampling=ONE_TOKEN),
        GenerationRequest(REL_SYSTEM_PROMPT, relative, sampling=ONE_TOKEN),
        GenerationRequest(
            ABS_SYSTEM_PROMPT, absolute, assistant_prefix="Feedback: fine. [RESULT] ", sampling=ONE_TOKEN
        ),
    ]


@pytest.mark.parametrize(
    "engine_name, server_name",
    [  # the tiny random Llama repeats SmolLM2's check on another tokenizer: the full tier (make test-all) only
        pytest.param("vllm_engine", "vllm_server", marks=pytest.mark.slow),
        ("smollm2_engine", "smollm2_server"),
    ],
)
def test_engine_and_server_render_the_same_tokens(request, engine_name, server_name):
    engine, url = request.getfixturevalue(engine_name), request.getfixturevalue(server_name)
    requests = _requests()
    chat, completions = OpenAIServer(url), OpenAIServer(url, endpoint="completions")
    counts = asyncio.run(engine.acount_tokens(requests))
    # the server's own rendering, through the client's /tokenize and in the usage of real generations
    assert asyncio.run(chat.acount_tokens(requests)) == counts
    assert [r.prompt_tokens for r in chat.generate(requests)] == counts
    assert [r.prompt_tokens for r in completions.generate(requests)] == counts
    assert chat.system_role == engine.system_role
    # token for token: the engine's ids are those the server's chat template gives the same messages
    for r in requests[:2]:
        messages = engine.wire.messages(r.system, r.user, system_role=engine.system_role)
        reply = httpx.post(
            url[: -len("/v1")] + "/tokenize",
            timeout=60,
            json={"model": chat.model, "messages": messages, "add_generation_prompt": True},
        )
        assert reply.json()["tokens"] == engine._ids(r)
