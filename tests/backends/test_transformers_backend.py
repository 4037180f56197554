"""The ``transformers`` backend on real local models: the tiny random Llama and SmolLM2-135M-Instruct."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from prom_reward.backends import make_backend
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.transformers_backend import TransformersBackend
from prom_reward.errors import BackendError, ConfigError

GREEDY = SamplingConfig(temperature=0.0, max_tokens=8, repetition_penalty=1.0, logprobs=3)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> TransformersBackend:
    return TransformersBackend(tiny_model_dir, batch_size=4)


def test_renders_training_form_and_counts(tiny: TransformersBackend):
    req = GenerationRequest("SYS", "USER", assistant_prefix="Feedback: ")
    assert tiny.system_role is False  # Mistral-style template: system folded in
    bos = tiny.tokenizer.bos_token
    assert tiny.render(req) == f"{bos}[INST] SYS\n\nUSER [/INST]Feedback: "
    ids = tiny._ids(req)
    assert ids.count(tiny.tokenizer.bos_token_id) == 1  # no second BOS on top of the template's
    assert asyncio.run(tiny.acount_tokens([req])) == [len(ids)]
    assert asyncio.run(tiny.acontext_length()) == 8192  # config.max_position_embeddings
    assert asyncio.run(TransformersBackend(tiny.model, tiny.tokenizer, max_model_len=4096).acontext_length()) == 4096


def test_batch_n2_and_logprobs(tiny: TransformersBackend):
    sampling = SamplingConfig(max_tokens=6, logprobs=5)
    reqs = [GenerationRequest("You judge.", "word " * (i + 1), sampling=sampling, n=2) for i in range(6)]
    results = tiny.generate(reqs)  # two model.generate calls of 4 and 2 prompts, left-padded
    assert [r.prompt_tokens for r in results] == asyncio.run(tiny.acount_tokens(reqs))
    assert len(set(r.prompt_tokens for r in results)) == 6
    for res in results:
        assert len(res.completions) == 2
        for c in res.completions:
            assert c.finish_reason in ("stop", "length") and c.logprobs is not None
            assert len(c.logprobs) == c.completion_tokens > 0
            for p in c.logprobs:
                assert p.token in p.top and p.top[p.token] >= p.logprob and p.logprob <= 0.0
                assert 1 <= len(p.top) <= 6
                assert sum(math.exp(v) for v in p.top.values()) <= 1.0 + 1e-4


def test_greedy_is_deterministic_argmax_and_padding_free(tiny: TransformersBackend):
    reqs = [GenerationRequest("S", "short"), GenerationRequest("S", "a much longer prompt " * 5)]
    reqs = [GenerationRequest(r.system, r.user, sampling=GREEDY, n=2) for r in reqs]
    batched = tiny.generate(reqs)
    alone = [tiny.generate([r])[0] for r in reqs]
    for b, a in zip(batched, alone, strict=True):
        first, second = b.completions
        assert first.text == second.text  # greedy n=2 repeats the sample
        assert first.text == a.completions[0].text  # left padding does not change the result
        for p in first.logprobs:  # the chosen token is the most likely one
            assert math.isclose(p.top[p.token], max(p.top.values()), abs_tol=1e-4)


def test_seed_makes_sampling_repeatable(tiny: TransformersBackend):
    s = SamplingConfig(max_tokens=6, seed=1234)
    one = tiny.generate([GenerationRequest("S", "seeded", sampling=s, n=2)])[0]
    two = tiny.generate([GenerationRequest("S", "seeded", sampling=s, n=2)])[0]
    assert [c.text for c in one.completions] == [c.text for c in two.completions]


def test_stop_strings_truncate(tiny: TransformersBackend):
    req = GenerationRequest("S", "Tell me something else entirely", sampling=GREEDY)
    full = tiny.generate([req])[0].completions[0]
    assert full.completion_tokens >= 4
    toks = [p.token for p in full.logprobs]
    stop = toks[2].strip() or toks[2]
    expected = full.text[: full.text.find(stop)]
    cut = tiny.generate(
        [
            GenerationRequest(
                "S",
                req.user,
                sampling=SamplingConfig(
                    temperature=0.0, max_tokens=8, repetition_penalty=1.0, logprobs=3, stop=(stop,)
                ),
            )
        ]
    )[0].completions[0]
    assert cut.text == expected and cut.finish_reason == "stop"
    assert cut.completion_tokens <= 3 and len(cut.logprobs) == cut.completion_tokens


def test_prefix_continues_the_rendered_prompt(tiny: TransformersBackend):
    prefix = "Feedback: good. [RESULT] "
    with_prefix = GenerationRequest("SYS", "Grade.", sampling=GREEDY, assistant_prefix=prefix)
    [res] = tiny.generate([with_prefix])
    raw = TransformersBackend(tiny.model, tiny.tokenizer, wire="raw")
    text = tiny.render(GenerationRequest("SYS", "Grade.")) + prefix
    [same] = raw.generate([GenerationRequest("", text, sampling=GREEDY)])
    assert res.completions[0].text == same.completions[0].text
    assert (
        res.prompt_tokens
        == same.prompt_tokens
        > asyncio.run(tiny.acount_tokens([GenerationRequest("SYS", "Grade.")]))[0]
    )


def test_registry_options_and_close(tiny_model_dir: Path):
    backend = make_backend("transformers", model=str(tiny_model_dir), wire="inst", dtype="float32")
    assert backend.render(GenerationRequest("S", "U")) == "[INST] S\nU [/INST]"
    [res] = backend.generate([GenerationRequest("S", "U", sampling=SamplingConfig(max_tokens=2))])
    assert res.completions[0].completion_tokens <= 2
    backend.close()
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.generate([GenerationRequest("S", "U")])
    with pytest.raises(ConfigError, match="chat, inst, raw"):
        TransformersBackend(tiny_model_dir, wire="nope")


@pytest.mark.smollm2
def test_smollm2_answers_sensibly(smollm2_dir: Path):
    backend = TransformersBackend(smollm2_dir)
    assert backend.system_role is True  # ChatML keeps the system message
    req = GenerationRequest(
        "You are a helpful assistant.",
        "What is the capital of France?",
        sampling=SamplingConfig(temperature=0.0, max_tokens=20, repetition_penalty=1.0),
    )
    [res] = backend.generate([req])
    assert "Paris" in res.completions[0].text and res.completions[0].finish_reason == "stop"


def test_teacher_forcing_runs_in_the_backends_worker_thread(tiny: TransformersBackend, monkeypatch):
    """``acontinuation_logprobs``: one position per continuation token, its forward passes off the caller's thread
    (the one thread hop: inside the engine backend)."""
    import threading

    seen: list[threading.Thread] = []
    forward = type(tiny.model).__call__

    def recording(model, *args, **kwargs):
        seen.append(threading.current_thread())
        return forward(model, *args, **kwargs)

    monkeypatch.setattr(type(tiny.model), "__call__", recording)
    req = GenerationRequest("SYS", "USER")
    (positions,) = asyncio.run(tiny.acontinuation_logprobs([req], ["Fine. [RESULT] 4"], 3))
    ids = tiny._ids(req)
    joint = tiny._ids(GenerationRequest("SYS", "USER", assistant_prefix="Fine. [RESULT] 4"))
    assert len(positions) == len(joint) - len(ids) > 0
    assert all(p.token in p.top for p in positions)
    assert seen and all(t is not threading.current_thread() for t in seen)
