"""Backend registry and the scripted backend."""

import inspect

import pytest

from prom_reward import BackendError, ConfigError, UnknownNameError
from prom_reward.backends import BACKENDS, Backend, backend_class, make_backend
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend


def test_unknown_backend_lists_valid_names():
    with pytest.raises(UnknownNameError) as e:
        make_backend("vllm-gpu")
    assert "openai, scripted, transformers, vllm" in str(e.value)


def test_all_registered_backends_import_and_follow_the_protocol():
    for name in BACKENDS.names():
        cls = backend_class(name)
        assert cls.name == name
        for method in ("generate", "close"):
            assert callable(getattr(cls, method))
        for method in ("agenerate", "acount_tokens", "acontext_length"):
            assert inspect.iscoroutinefunction(getattr(cls, method)), (name, method)
        if cls.capabilities.continuation_logprobs:
            assert inspect.iscoroutinefunction(cls.acontinuation_logprobs), name


def test_object_passes_through_but_not_with_options():
    b = ScriptedBackend(outputs=["x"])
    assert make_backend(b) is b and isinstance(b, Backend)
    with pytest.raises(ConfigError, match="constructor"):
        make_backend(b, model="m")


def test_scripted_replays_in_order_and_records_calls():
    b = make_backend("scripted", outputs=["one", "two", "three"])
    res = b.generate([GenerationRequest("s", "u", n=2), GenerationRequest("s", "v")])
    assert [c.text for r in res for c in r.completions] == ["one", "two", "three"]
    assert b.calls[0][0].n == 2 and b.remaining == 0
    with pytest.raises(BackendError, match="ran out"):
        b.generate([GenerationRequest("s", "u")])
