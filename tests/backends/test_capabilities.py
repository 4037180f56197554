"""Backend capabilities: every backend declares each one, typed, and the behaviour each one switches happens."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from benchmarks.overhead import NoOpBackend
from benchmarks.reference_replay import ReferenceReplayBackend
from prom_reward.backends import BACKENDS, Backend, BackendCapabilities, CachedBackend, backend_class
from prom_reward.backends.base import GenerationRequest, GenerationResult
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.backends.store import JudgmentStore
from prom_reward.backends.transformers_backend import TransformersBackend
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.errors import BackendError, ConfigError

CAPABILITIES = [f.name for f in dataclasses.fields(BackendCapabilities)]

DECLARED = [  # class: (tokens_at_most_bytes, streams_results, thread_safe, continuation_logprobs)
    (VLLMEngine, (True, False, False, True)),
    (OpenAIServer, (True, True, True, True)),
    (TransformersBackend, (True, False, False, True)),
    (ScriptedBackend, (False, False, False, False)),
    (ReferenceReplayBackend, (False, False, False, False)),
    (NoOpBackend, (False, False, False, False)),
]


def test_the_capabilities_are_the_four_the_callers_read():
    assert CAPABILITIES == ["tokens_at_most_bytes", "streams_results", "thread_safe", "continuation_logprobs"]


@pytest.mark.parametrize("cls, declared", DECLARED, ids=[c.__name__ for c, _ in DECLARED])
def test_every_backend_class_declares_every_capability(cls, declared):
    caps = cls.capabilities
    assert type(caps) is BackendCapabilities
    assert all(type(getattr(caps, name)) is bool for name in CAPABILITIES)
    assert dataclasses.astuple(caps) == declared
    assert callable(cls.special_tokens)
    assert all(hasattr(cls, member) for member in ("fingerprint", "gpu_memory_share"))  # declared, typed, in base.py


def test_every_registered_backend_is_in_the_table():
    assert {backend_class(name) for name in BACKENDS.names()} <= {cls for cls, _ in DECLARED}


@pytest.mark.parametrize("name", CAPABILITIES)
def test_a_capability_is_a_bool_and_none_is_assumed(name):
    given = dict.fromkeys(CAPABILITIES, False)
    with pytest.raises(ConfigError, match=rf"^{name}: expected True or False, got 1"):
        BackendCapabilities(**{**given, name: 1})
    with pytest.raises(TypeError, match=name):
        BackendCapabilities(**{k: v for k, v in given.items() if k != name})


class Streaming(ScriptedBackend):
    """A scripted backend that reports each result as it completes and then fails on the third."""

    capabilities = dataclasses.replace(ScriptedBackend.capabilities, streams_results=True)

    def generate(self, requests, *, on_result=None):
        out = []
        for i, r in enumerate(requests):
            if i == 2:
                raise BackendError("the server went away")
            out.append(super().generate([r])[0])
            on_result(i, out[-1])
        return out


@pytest.mark.parametrize("streams", [True, False])
def test_a_store_saves_results_as_they_arrive_only_from_a_backend_that_streams(tmp_path, streams):
    inner = Streaming(respond=lambda r, i: f"{r.user} [RESULT] 4")
    if not streams:
        inner.capabilities = ScriptedBackend.capabilities  # generate() would then take no on_result
        inner.generate = lambda requests: Streaming.generate(inner, requests, on_result=lambda i, res: None)
    cached = CachedBackend(inner, tmp_path / "j.sqlite")
    assert cached.capabilities.streams_results is False  # its own generate reports at the end
    assert dataclasses.replace(cached.capabilities, streams_results=streams) == inner.capabilities
    requests = [GenerationRequest("s", f"u{k}") for k in range(4)]
    with pytest.raises(BackendError, match="went away"):
        cached.generate(requests)
    cached.close()
    assert len(JudgmentStore(tmp_path / "j.sqlite").get_many(cached.keys_for(requests))) == (2 if streams else 0)


class Forcing(ScriptedBackend):
    """A scripted backend that declares teacher forcing and records what it scores."""

    capabilities = dataclasses.replace(ScriptedBackend.capabilities, continuation_logprobs=True)

    async def acontinuation_logprobs(self, requests, continuations, top_k=20, deadline=None):
        self.scored = list(continuations)
        return [() for _ in continuations]


def test_teacher_forcing_follows_the_declaration_through_a_store(tmp_path):
    plain, forcing = ScriptedBackend(outputs=[]), Forcing(outputs=[])
    assert not plain.capabilities.continuation_logprobs and forcing.capabilities.continuation_logprobs
    cached = CachedBackend(forcing, tmp_path / "a.sqlite")
    assert cached.capabilities.continuation_logprobs
    assert asyncio.run(cached.acontinuation_logprobs([GenerationRequest("s", "u")], ["Fine. [RESULT] 4"], 5)) == [()]
    assert forcing.scored == ["Fine. [RESULT] 4"]
    plain_cached = CachedBackend(plain, tmp_path / "b.sqlite")
    assert not plain_cached.capabilities.continuation_logprobs
    with pytest.raises(ConfigError, match="declares capabilities.continuation_logprobs=False"):
        asyncio.run(plain_cached.acontinuation_logprobs([GenerationRequest("s", "u")], ["x"]))


class WithSpecials(ScriptedBackend):
    def special_tokens(self):
        return ("<|turn|>",)


def test_a_store_declares_and_forwards_what_its_backend_does(tmp_path):
    cached = CachedBackend(WithSpecials(outputs=["ok [RESULT] 3"]), tmp_path / "j.sqlite")
    assert isinstance(cached, Backend) and cached.special_tokens() == ("<|turn|>",)
    assert cached.capabilities == ScriptedBackend.capabilities
    assert [r.completions[0].text for r in cached.generate([GenerationRequest("s", "u")])] == ["ok [RESULT] 3"]
    assert isinstance(cached.generate([GenerationRequest("s", "u")])[0], GenerationResult) and cached.hits == 1
