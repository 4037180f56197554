"""The vLLM API prom-reward relies on, checked against the INSTALLED vLLM's own signatures, argument parser
and request models, so that an upgrade which renames a keyword, a flag or a request field fails here and
not on a user's GPU. No GPU and no engine: only vLLM's Python objects. The tables checked live in
``prom_reward.backends.vllm_options``; ``scripts/check_vllm_source.py`` checks the same tables from the
source of a vLLM wheel that is not installed (0.33.0: see docs/serving.md, "GPU install")."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.util
import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

from prom_reward.backends._openai_wire import MAX_TOP_LOGPROBS
from prom_reward.backends.base import DEFAULT_TOP_K, GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.servers import ServeConfig
from prom_reward.backends.vllm_options import (
    ENGINE_FLAGS,
    LOGPROBS,
    OTHER_ENGINE_KEYWORDS,
    REQUEST_FIELDS,
    SAMPLING_KEYWORDS,
    SERVER_MODULE,
    TOKENIZER_MODES,
    VLLMOptions,
    sampling_kwargs,
    teacher_forcing_kwargs,
)
from prom_reward.core.judge import EXPECTED_LOGPROBS
from tests.fakes import FakeServer

REPO = Path(__file__).resolve().parents[2]
# where vLLM has kept the api_server's make_arg_parser (0.33: common; 0.32: launchers)
PARSER_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")
# the options of each server command line checked below: every bool both ways, an optional value set and unset
OPTION_SETS = [
    VLLMOptions(),
    VLLMOptions(
        tensor_parallel_size=2,
        dtype="bfloat16",
        max_model_len=8192,
        gpu_memory_utilization=0.45,
        enable_prefix_caching=False,
        enforce_eager=True,
        seed=7,
        tokenizer_mode="mistral",
        max_logprobs=32,
    ),
]


@pytest.fixture(scope="module")
def server_parser():
    """The installed vLLM's own api_server argument parser."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.make_arg_parser(FlexibleArgumentParser())
    pytest.fail(f"no make_arg_parser in {PARSER_MODULES}: find where this vLLM builds the api_server's parser")


def test_the_server_module_is_there():
    assert importlib.util.find_spec(SERVER_MODULE) is not None


@pytest.mark.integration  # builds vLLM's engine arguments (imports vLLM, resolves the model config)
def test_every_engine_keyword_is_an_engine_argument(tmp_path):
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    params = inspect.signature(LLM.__init__).parameters
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())  # the rest goes to EngineArgs
    for opts in OPTION_SETS:
        kwargs = opts.llm_kwargs(str(tmp_path))  # a local folder: vLLM resolves a hub id when HF_HUB_OFFLINE=1
        unset = {"max_model_len"} - ({"max_model_len"} if opts.max_model_len else set())
        unset |= {"enforce_eager"} if opts.enforce_eager is None else set()  # None: vLLM's default, or CPU's eager
        assert set(kwargs) == {k for k, _ in ENGINE_FLAGS} - unset
        assert set(kwargs) | set(OTHER_ENGINE_KEYWORDS) <= fields, sorted(set(kwargs) - fields)
        args = EngineArgs(**kwargs, distributed_executor_backend="mp")  # vLLM's own dataclass takes them all
        assert {k: getattr(args, k) for k in kwargs} == kwargs


@pytest.mark.parametrize("opts", OPTION_SETS, ids=["defaults", "all-set"])
def test_server_flags_start_the_same_engine(server_parser, opts):
    cmd = ServeConfig(model="org/judge", engine=opts, gpus=(0, 1), port=8123).command("org/judge", 1)
    assert cmd[:3] == [sys.executable, "-m", SERVER_MODULE]
    try:
        ns = server_parser.parse_args(cmd[3:])
    except SystemExit:  # argparse printed which flag it does not know
        pytest.fail(f"vLLM's api_server parser refused {cmd[3:]}")
    assert {k: getattr(ns, k) for k in opts.llm_kwargs("org/judge")} == opts.llm_kwargs("org/judge")
    assert (ns.host, ns.port) == ("127.0.0.1", 8124)


def test_sampling_keywords_are_sampling_params():
    from vllm import SamplingParams

    assert set(SAMPLING_KEYWORDS) <= set(inspect.signature(SamplingParams).parameters)
    full = SamplingConfig(
        temperature=0.7,
        top_p=0.8,
        top_k=5,
        seed=3,
        stop=("###",),
        logprobs=LOGPROBS,
        repetition_penalty=1.03,
        max_tokens=64,
    )
    for kwargs in (sampling_kwargs(full, 2, per_request_seed=True), teacher_forcing_kwargs(DEFAULT_TOP_K)):
        params = SamplingParams(**kwargs)
        assert {k: getattr(params, k) for k in kwargs} == kwargs


def test_the_logprob_counts_we_read_fit_vllms_limit(server_parser):
    from vllm import SamplingParams

    most = max(EXPECTED_LOGPROBS, DEFAULT_TOP_K, MAX_TOP_LOGPROBS, LOGPROBS)
    limit = VLLMOptions().max_logprobs
    assert most <= limit
    assert server_parser.parse_args(VLLMOptions().server_args("m")).max_logprobs == limit
    model = SimpleNamespace(max_logprobs=limit, get_vocab_size=lambda: 49152)
    SamplingParams(logprobs=most, prompt_logprobs=most)._validate_logprobs(model)  # vLLM's own check passes
    with pytest.raises(Exception, match="greater than max allowed"):  # and it is enforced: the limit matters
        SamplingParams(logprobs=limit + 1)._validate_logprobs(model)


def test_tokenizer_modes_are_vllm_modes():
    from vllm.config.model import TokenizerMode

    assert set(TOKENIZER_MODES) <= set(typing.get_args(TokenizerMode))


def test_hf_mode_keeps_a_mistral_layout_folder_on_the_hf_tokenizer(tmp_path, smollm2_dir):
    """Why the mode is explicit: with vLLM's "auto", a folder in Mistral's layout gets mistral_common."""
    from vllm.tokenizers.registry import resolve_tokenizer_args

    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((smollm2_dir / name).read_bytes())
    (tmp_path / "consolidated.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.model.v3").write_bytes(b"")
    assert resolve_tokenizer_args(str(tmp_path), tokenizer_mode="auto")[0] == "mistral"
    assert resolve_tokenizer_args(str(tmp_path), tokenizer_mode=VLLMOptions().tokenizer_mode)[0] == "hf"


def _recording_server() -> FakeServer:
    """Enough of a vLLM server for every request kind OpenAIServer sends (its bodies are recorded)."""

    def tokenize(n: int, body: dict) -> tuple[int, dict]:
        size = len(json.dumps(body.get("messages") or body.get("prompt")))
        return 200, {"tokens": list(range(size)), "count": size, "max_model_len": 4096}

    def chat(n: int, body: dict) -> tuple[int, dict]:
        top = [{"token": " 4", "logprob": -0.1}]
        message = {"role": "assistant", "content": "Good. [RESULT] 4"}
        return 200, {
            "choices": [
                {
                    "index": i,
                    "message": message,
                    "finish_reason": "stop",
                    "logprobs": {"content": [{"token": " 4", "logprob": -0.1, "top_logprobs": top}]},
                }
                for i in range(body["n"])
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }

    def completions(n: int, body: dict) -> tuple[int, dict]:
        if "prompt_logprobs" in body:
            entries = [None] + [{str(t): {"logprob": -0.5, "decoded_token": "x"}} for t in body["prompt"][1:]]
            return 200, {"choices": [{"index": 0, "text": "", "prompt_logprobs": entries}]}
        return 200, {
            "choices": [{"index": i, "text": "Good. [RESULT] 4", "finish_reason": "stop"} for i in range(body["n"])],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }

    return FakeServer(
        {
            "/v1/models": lambda n, b: (200, {"data": [{"id": "judge", "max_model_len": 4096}]}),
            "/tokenize": tokenize,
            "/detokenize": lambda n, b: (200, {"prompt": "PROM_REWARD_SYSTEM_PROBE x"}),
            "/v1/chat/completions": chat,
            "/v1/completions": completions,
        }
    )


def test_client_request_fields_are_vllm_request_fields():
    """Every body OpenAIServer sends (both endpoints, a prefix, teacher forcing, token counts, the
    system-role probe) uses only REQUEST_FIELDS, and each of those is a field of vLLM's request model."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.entrypoints.serve.tokenize.protocol import (
        DetokenizeRequest,
        TokenizeChatRequest,
        TokenizeCompletionRequest,
    )

    models = {
        m.__name__: m
        for m in (
            ChatCompletionRequest,
            CompletionRequest,
            TokenizeChatRequest,
            TokenizeCompletionRequest,
            DetokenizeRequest,
        )
    }
    for name, fields in REQUEST_FIELDS.items():
        known = set(models[name].model_fields)
        assert set(fields) <= known, (name, sorted(set(fields) - known))
    server = _recording_server()
    try:
        sampling = SamplingConfig(temperature=0.7, top_k=5, seed=3, stop=("###",), logprobs=LOGPROBS)
        requests = [
            GenerationRequest(system="sys", user="grade this", n=2, sampling=sampling),
            GenerationRequest(system="sys", user="again", assistant_prefix="Feedback:", sampling=sampling),
        ]
        for endpoint in ("chat", "completions"):
            client = OpenAIServer(server.url, endpoint=endpoint)
            assert all(r.completions for r in client.generate(requests))
            assert asyncio.run(client.acount_tokens(requests[:1]))[0] > 0
            assert asyncio.run(client.acontinuation_logprobs(requests[:1], [" Good. [RESULT] 4"]))[0]
        assert (
            asyncio.run(OpenAIServer(server.url, endpoint="completions", wire="raw").acount_tokens(requests[:1]))[0] > 0
        )
    finally:
        server.stop()
    kinds = {
        "/v1/chat/completions": lambda b: "ChatCompletionRequest",
        "/v1/completions": lambda b: "CompletionRequest",
        "/tokenize": lambda b: "TokenizeChatRequest" if "messages" in b else "TokenizeCompletionRequest",
        "/detokenize": lambda b: "DetokenizeRequest",
    }
    seen = set()
    for path, body in server.calls:
        if path not in kinds:
            continue
        name = kinds[path](body)
        seen.add(name)
        assert set(body) <= set(REQUEST_FIELDS[name]), (name, sorted(set(body) - set(REQUEST_FIELDS[name])))
        models[name].model_validate(body)  # and vLLM's own validation accepts the body
    assert seen == set(REQUEST_FIELDS)


def _load_source_check():
    spec = importlib.util.spec_from_file_location("check_vllm_source", REPO / "scripts" / "check_vllm_source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration  # runs the source check in a subprocess over the installed vLLM
def test_the_source_check_agrees_on_the_installed_vllm():
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_vllm_source.py")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checks, 0 failed" in out.stdout and "ok    server flag --gpu-memory-utilization" in out.stdout


def test_the_source_check_catches_a_renamed_keyword_flag_and_field(monkeypatch):
    module = _load_source_check()
    monkeypatch.setattr(module, "ENGINE_FLAGS", (*ENGINE_FLAGS, ("gpu_mem_util", "--gpu-mem-util")))
    monkeypatch.setattr(module, "SAMPLING_KEYWORDS", (*SAMPLING_KEYWORDS, "best_of"))
    monkeypatch.setattr(module, "REQUEST_FIELDS", {**REQUEST_FIELDS, "DetokenizeRequest": ("model", "token_ids")})
    src = module.Source(Path(importlib.util.find_spec("vllm").submodule_search_locations[0]).parent)
    failed = {what for ok, what, _ in module.check(src) if not ok}
    assert failed == {
        "vllm.LLM keyword gpu_mem_util",
        "SamplingParams keyword best_of",
        "request model DetokenizeRequest",
    }
