"""``VLLMOptions``: one settings model for the in-process engine and the server; GPU memory shares of two
engines in one process (no vLLM needed: the kwargs and argv are checked, the engines are not started)."""

from __future__ import annotations

import pytest

from prom_reward import ConfigError
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.vllm_options import (
    ENGINE_FLAGS,
    NO_ENGINE_ENV,
    SAMPLING_KEYWORDS,
    VLLMOptions,
    sampling_kwargs,
    share_gpu_memory,
    teacher_forcing_kwargs,
)


def test_both_paths_get_every_option_of_the_table():
    opts = VLLMOptions(
        tensor_parallel_size=2,
        dtype="bfloat16",
        max_model_len=8192,
        gpu_memory_utilization=0.45,
        enable_prefix_caching=False,
        enforce_eager=True,
        seed=7,
        max_logprobs=32,
    )
    kwargs = opts.llm_kwargs("org/judge")
    assert kwargs == {
        "model": "org/judge",
        "tensor_parallel_size": 2,
        "dtype": "bfloat16",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.45,
        "enable_prefix_caching": False,
        "enforce_eager": True,
        "seed": 7,
        "tokenizer_mode": "hf",
        "max_logprobs": 32,
    }
    assert opts.server_args("org/judge") == [
        "--model",
        "org/judge",
        "--tensor-parallel-size",
        "2",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.45",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--seed",
        "7",
        "--tokenizer-mode",
        "hf",
        "--max-logprobs",
        "32",
    ]
    assert [k for k, _ in ENGINE_FLAGS] == list(kwargs)  # the table is the order of both


def test_defaults_are_explicit_and_none_is_left_out():
    kwargs = VLLMOptions().llm_kwargs("m")
    assert "max_model_len" not in kwargs and "--max-model-len" not in VLLMOptions().server_args("m")
    assert (kwargs["gpu_memory_utilization"], kwargs["tokenizer_mode"], kwargs["max_logprobs"]) == (0.9, "hf", 20)
    flags = VLLMOptions().server_args("m")  # enforce_eager None: vLLM's own default on a GPU
    assert "--enforce-eager" not in flags and "--no-enforce-eager" not in flags and "enforce_eager" not in kwargs
    assert "--enforce-eager" in VLLMOptions().for_cpu().server_args("m")  # eager on the CPU build
    assert "--no-enforce-eager" in VLLMOptions(enforce_eager=False).for_cpu().server_args("m")  # unless asked


def test_engine_options_go_in_process_only():
    opts = VLLMOptions(engine_options={"distributed_executor_backend": "mp"})
    assert opts.llm_kwargs("m")["distributed_executor_backend"] == "mp"
    assert "mp" not in opts.server_args("m")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"tensor_parallel_size": 0}, "tensor_parallel_size: expected an int >= 1"),
        ({"max_model_len": 0}, "max_model_len: expected an int >= 1 or None"),
        ({"gpu_memory_utilization": 0}, r"gpu_memory_utilization: expected a number in \(0, 1\]"),
        ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization"),
        ({"gpu_memory_utilization": True}, "gpu_memory_utilization"),
        ({"enforce_eager": "yes"}, "enforce_eager: expected True or False or None"),
        ({"seed": 1.5}, "seed: expected an int"),
        ({"dtype": ""}, "dtype"),
        ({"tokenizer_mode": "auto"}, "tokenizer_mode: expected one of hf, mistral .*mistral_common"),
        ({"max_logprobs": 5}, r"max_logprobs: expected an int >= 20 \(prom-reward reads the top 20\)"),
        ({"engine_options": {"gpu_memory_utilization": 0.5}}, r"engine_options sets \['gpu_memory_utilization'\]"),
        ({"engine_options": ["x"]}, "engine_options: expected a mapping"),
    ],
)
def test_bad_options_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        VLLMOptions(**kw)


def test_unknown_settings_list_the_valid_names():
    with pytest.raises(ConfigError, match=r"unknown vLLM engine option\(s\) \['gpu_mem'\]; valid: .*gpu_memory_util"):
        VLLMOptions.from_settings({"gpu_mem": 0.5})


@pytest.mark.parametrize(
    "first, second, shares",
    [(None, None, (0.45, 0.45)), (0.6, None, (0.6, 0.3)), (None, 0.2, (0.7, 0.2)), (0.5, 0.5, (0.5, 0.5))],
)
def test_memory_shares_of_two_engines(first, second, shares):
    assert share_gpu_memory(first, second) == shares


@pytest.mark.parametrize("first, second, match", [(0.9, None, "leaves nothing"), (0.7, 0.4, "pass 1")])
def test_memory_shares_that_cannot_both_start_are_refused(first, second, match):
    with pytest.raises(ConfigError, match=match):
        share_gpu_memory(first, second)


def test_sampling_keywords_cover_every_request():
    full = SamplingConfig(temperature=0.7, top_k=5, seed=3, stop=("###",), logprobs=20)
    assert set(sampling_kwargs(full, 2, per_request_seed=True)) | set(teacher_forcing_kwargs(20)) == set(
        SAMPLING_KEYWORDS
    )
    assert "seed" not in sampling_kwargs(full, 2, per_request_seed=False)  # the CPU build dies on one
    assert "top_k" not in sampling_kwargs(SamplingConfig(), 1, per_request_seed=True)


def test_the_cli_sets_the_in_process_share():
    import argparse

    from prom_reward.cli.voice import add_judge_options, judge_spec

    p = argparse.ArgumentParser()
    add_judge_options(p)
    kwargs = judge_spec(p.parse_args(["--model", "m", "--gpu-memory-utilization", "0.3"])).kwargs()
    assert kwargs["gpu_memory_utilization"] == 0.3
    assert "gpu_memory_utilization" not in judge_spec(p.parse_args(["--model", "m"])).kwargs()  # VLLMOptions' default


def test_the_engine_starts_vllm_with_the_options_kwargs(monkeypatch):
    import vllm

    from prom_reward.backends import vllm_engine

    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)  # the engine below is a recorder: allowed in the unit tier
    monkeypatch.setattr(vllm_engine, "check_engine_allowed", lambda what: None)  # and not an engine start to count
    seen = []

    class RecordingLLM:  # stands in for vllm.LLM: records what the engine would start with
        def __init__(self, **kwargs):
            seen.append(kwargs)

        def get_tokenizer(self):
            return None

    monkeypatch.setattr(vllm, "LLM", RecordingLLM)
    engine = vllm_engine.VLLMEngine(
        "m",
        wire="raw",
        gpu_memory_utilization=0.4,
        max_model_len=2048,
        engine_options={"distributed_executor_backend": "mp"},
    )
    assert seen == [engine.options.llm_kwargs("m")] and seen[0]["gpu_memory_utilization"] == 0.4
    assert seen[0]["tokenizer_mode"] == "hf" and seen[0]["distributed_executor_backend"] == "mp"
    with pytest.raises(ConfigError, match=r"unknown vLLM engine option\(s\) \['gpu_share'\]"):
        vllm_engine.VLLMEngine("m", wire="raw", gpu_share=0.4)
    with pytest.raises(ConfigError, match="given with a ready llm="):
        vllm_engine.VLLMEngine(llm=RecordingLLM(), max_model_len=2048)
