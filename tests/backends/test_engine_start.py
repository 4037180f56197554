"""An in-process engine starts in its backend's worker thread: a caller on an event loop keeps running meanwhile."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from prom_reward.backends import vllm_engine
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.transformers_backend import TransformersBackend
from prom_reward.backends.vllm_options import NO_ENGINE_ENV
from prom_reward.errors import BackendError, ConfigError

RELEASED: list[bool] = []
THREADS: list[threading.Thread] = []


def wait_for_the_loop(release: threading.Event) -> None:
    """A stand-in engine start: it ends only when the caller's loop releases it (a start that blocked the
    loop would wait here in vain for 20 s), recording its thread."""
    RELEASED.append(release.wait(timeout=20))
    THREADS.append(threading.current_thread())


async def start_released_by_the_loop(build, release: threading.Event, ready):
    """``build()`` on the running loop, whose callback then releases the start; ``ready(backend)`` awaited."""
    RELEASED.clear()
    THREADS.clear()
    backend = build()
    asyncio.get_running_loop().call_later(0.05, release.set)  # only a loop that runs on can release the start
    return backend, await ready(backend)


def test_a_vllm_engine_starts_in_its_worker_thread_while_the_loop_runs(monkeypatch, tiny_model_dir: Path):
    import vllm

    release = threading.Event()

    class SlowLLM:  # stands in for vllm.LLM
        def __init__(self, **kwargs):
            wait_for_the_loop(release)
            self.llm_engine = type("E", (), {"model_config": type("C", (), {"max_model_len": 321})()})()

        def get_tokenizer(self):
            raise AssertionError("the engine's tokenizer was read although the model's own was loaded")

    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)  # the engine below is a stand-in
    monkeypatch.setattr(vllm_engine, "check_engine_allowed", lambda what: None)
    monkeypatch.setattr(vllm, "LLM", SlowLLM)
    build = lambda: vllm_engine.VLLMEngine(str(tiny_model_dir), wire="raw")  # noqa: E731
    engine, context = asyncio.run(start_released_by_the_loop(build, release, lambda b: b.acontext_length()))
    assert RELEASED == [True] and context == 321
    assert THREADS[0] is not threading.main_thread()
    assert asyncio.run(engine.acount_tokens([GenerationRequest("s", "u")]))[0] > 0
    engine.close()


def test_a_failed_start_on_a_loop_raises_at_the_first_call_and_a_sync_one_at_once(monkeypatch, tiny_model_dir: Path):
    import vllm

    def refuse(**kwargs):
        raise ConfigError("no room for the engine")

    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)
    monkeypatch.setattr(vllm_engine, "check_engine_allowed", lambda what: None)
    monkeypatch.setattr(vllm, "LLM", refuse)

    async def main():
        engine = vllm_engine.VLLMEngine(str(tiny_model_dir), wire="raw")
        await engine.agenerate([GenerationRequest("s", "u")])

    with pytest.raises(ConfigError, match="no room for the engine"):
        asyncio.run(main())
    with pytest.raises(ConfigError, match="no room for the engine"):
        vllm_engine.VLLMEngine(str(tiny_model_dir), wire="raw")


def test_transformers_weights_load_in_the_worker_thread_while_the_loop_runs(monkeypatch, tiny_model_dir: Path):
    import transformers

    loaded = transformers.AutoModelForCausalLM.from_pretrained
    release = threading.Event()

    def slow(*args, **kwargs):
        wait_for_the_loop(release)
        return loaded(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", slow)
    build = lambda: TransformersBackend(tiny_model_dir)  # noqa: E731
    backend, context = asyncio.run(start_released_by_the_loop(build, release, lambda b: b.acontext_length()))
    assert RELEASED == [True] and context == 8192
    assert THREADS[0] is not threading.main_thread()
    backend.close()
    with pytest.raises(BackendError, match="was closed"):
        backend.generate([GenerationRequest("s", "u")])
