"""Backend fingerprints: every backend declares one (``Backend.fingerprint``), and its values, hence every judgment
store key, are pinned to what stores were written with before it was declared (a change orphans stored judgments)."""

from __future__ import annotations

import pytest

from benchmarks.overhead import NoOpBackend
from benchmarks.reference_replay import ReferenceReplayBackend
from prom_reward.backends import CachedBackend
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.backends.store import request_key
from prom_reward.backends.transformers_backend import TransformersBackend
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.core.judge import PrometheusJudge
from prom_reward.jobs.plan import judge_fingerprint

REQUEST = GenerationRequest("sys", "user")


class Tokenizer:
    """What a backend built on a ready model reads of its tokenizer (no chat template: wire ``raw`` or ``inst``)."""

    eos_token_id = pad_token_id = 0
    chat_template = None
    all_special_tokens = ["</s>"]


class LLM:
    """A ready ``vllm.LLM`` stand-in (``VLLMEngine(llm=...)`` reads only its tokenizer): no engine starts."""

    def get_tokenizer(self) -> Tokenizer:
        return Tokenizer()


PINNED = [  # id, backend, its fingerprint, the key of REQUEST (all as computed at 13b6392, before the declaration)
    (
        "vllm",
        lambda: VLLMEngine("org/judge", llm=LLM()),
        {"name": "vllm", "model": "org/judge", "wire": "chat"},
        "86aa3614f3cf3ce5ff5e799d620d36f2a18d843e3d4ccfe68ff42c95684bffe9",
    ),
    (
        "vllm_inst",
        lambda: VLLMEngine("/m/judge", wire="inst", llm=LLM()),
        {"name": "vllm", "model": "/m/judge", "wire": "inst"},
        "c975739a943f803bc48dd2d2a4450a1feb168a78ad8271a526b2fb60aed3eafc",
    ),
    (
        "vllm_ready_llm",
        lambda: VLLMEngine(llm=LLM(), wire="raw"),
        {"name": "vllm", "model": None, "wire": "raw"},
        "d75081a17e0a0f22cbdc24474352eb644bb729d28009959bb997383aad03e264",
    ),
    (
        "openai",
        lambda: OpenAIServer("http://127.0.0.1:9/v1", "m"),
        {"name": "openai", "model": "m", "wire": "chat"},
        "8baab07d1f5f47e478bf5b0602bb7f58b3fb7294cba348d65e39a55245fb03aa",
    ),
    (
        "openai_model_not_named",
        lambda: OpenAIServer(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]),
        {"name": "openai", "model": None, "wire": "chat"},
        "9be0243f92041e9473433b357e00e85dc2246b21f7353126d20a0560a7ce1a2f",
    ),
    (
        "openai_completions_raw",
        lambda: OpenAIServer("http://127.0.0.1:9/v1", "m", endpoint="completions", wire="raw"),
        {"name": "openai", "model": "m", "wire": "raw"},
        "96dfed6fb720e8525709cef6b2379368ec910f9feeb1288b4bbb15e1d9361cce",
    ),
    (
        "scripted",
        lambda: ScriptedBackend(outputs=[]),
        {"name": "scripted", "model": None, "wire": None},
        "c66edd20f7033240cd9b7acda7d1b2ae19a6f06d69002d92e5f9def9be85a27c",
    ),
    (
        "noop",
        NoOpBackend,
        {"name": "noop", "model": None, "wire": None},
        "75099f14cdbe814fe787ab1f8f8a0dcfb20774b46ea7317545d64e78f3e6056f",
    ),
    (
        "reference_replay",
        lambda: ReferenceReplayBackend({"p": ["x [RESULT] 4"]}, source="a test record"),
        {"name": "reference_replay[a test record]", "model": None, "wire": None},
        "c45b5c265b43b9cf0967d321cfed1a8fc7a420ecbbc1a2099d8c60dde45b186e",
    ),
]


@pytest.mark.parametrize("make, fingerprint, key", [p[1:] for p in PINNED], ids=[p[0] for p in PINNED])
def test_every_backend_keeps_the_fingerprint_its_stores_were_written_with(tmp_path, make, fingerprint, key):
    backend = make()
    assert backend.fingerprint == fingerprint and request_key(backend.fingerprint, REQUEST) == key
    cached = CachedBackend(backend, tmp_path / "j.sqlite")
    assert cached.fingerprint == fingerprint and cached.keys_for([REQUEST]) == [key]
    assert judge_fingerprint(PrometheusJudge(backend=backend))["backend"] == fingerprint  # a job's manifest
    cached.close()


def test_an_openai_fingerprint_names_the_model_once_the_server_did_but_a_store_keeps_its_first(tmp_path):
    server = OpenAIServer("http://127.0.0.1:9/v1")
    cached = CachedBackend(server, tmp_path / "j.sqlite")
    server.model = "served-id"  # what GET /models answered
    assert server.fingerprint == {"name": "openai", "model": "served-id", "wire": "chat"}
    assert cached.fingerprint == {"name": "openai", "model": None, "wire": "chat"}
    cached.close()


def test_a_loaded_transformers_model_is_fingerprinted_by_its_text():
    """A model object given loaded is keyed by ``str(model)`` (the module's printed layers), as before."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
    )
    backend = TransformersBackend(model, Tokenizer(), wire="raw")
    assert backend.fingerprint == {"name": "transformers", "model": str(backend.model), "wire": "raw"}
    assert backend.fingerprint["model"].startswith("LlamaForCausalLM(\n  (model): LlamaModel(")


def test_a_deferred_engine_is_keyed_as_it_will_be_once_built(tmp_path, monkeypatch):
    """``CachedBackend.deferred`` keys a vLLM engine it has not started with the engine's own fingerprint."""
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda model: Tokenizer())
    cached = CachedBackend.deferred("vllm", {"model": "org/judge"}, tmp_path / "j.sqlite")
    vllm = PINNED[0]
    assert not cached.built and cached.fingerprint == vllm[2] == VLLMEngine("org/judge", llm=LLM()).fingerprint
    assert cached.keys_for([REQUEST]) == [vllm[3]] and cached.special_tokens() == ("</s>",) and not cached.built
    cached.close()
