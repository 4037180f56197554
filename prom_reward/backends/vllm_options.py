"""Every option prom-reward hands to vLLM, in one place (``VLLMOptions``, ``ENGINE_FLAGS``): the in-process
engine's ``vllm.LLM`` keywords, the judge server's flags and each request's ``SamplingParams``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError

SERVER_MODULE = "vllm.entrypoints.openai.api_server"  # what ``python -m`` runs for a judge server

NO_ENGINE_ENV = "PROM_REWARD_NO_ENGINE"
"""When ``1``, starting a vLLM engine or judge server raises ``ConfigError`` (set by ``make test-fast``)."""

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # one engine's GPU share, and the total two engines in a process split

LOGPROBS = 20
"""Top logprobs per position prom-reward asks for: the engine's and the server's ``max_logprobs``."""


def check_engine_allowed(what: str) -> None:
    """Raise ``ConfigError`` when ``NO_ENGINE_ENV`` forbids starting ``what`` (a vLLM engine or server)."""
    if os.environ.get(NO_ENGINE_ENV) == "1":
        raise ConfigError(
            f"{what}: expected no vLLM engine or server to start while {NO_ENGINE_ENV}=1 (the unit test tier, "
            f"`make test-fast`); mark the test `pytest.mark.integration` or unset {NO_ENGINE_ENV}"
        )


TOKENIZER_MODES = ("hf", "mistral")  # vLLM's ``auto`` is refused: it may pick either

OTHER_ENGINE_KEYWORDS = ("distributed_executor_backend",)  # passed through engine_options (jobs.batch)

SAMPLING_KEYWORDS = (
    "n",
    "temperature",
    "top_p",
    "repetition_penalty",
    "max_tokens",
    "logprobs",
    "stop",
    "top_k",
    "seed",
    "prompt_logprobs",
)
"""Every ``vllm.SamplingParams`` keyword ``sampling_kwargs`` and ``teacher_forcing_kwargs`` use."""

_SAMPLING_FIELDS = tuple(k for k in SAMPLING_KEYWORDS if k != "prompt_logprobs")  # as OpenAIServer sends them
REQUEST_FIELDS: dict[str, tuple[str, ...]] = {
    "ChatCompletionRequest": (
        "model",
        "messages",
        *_SAMPLING_FIELDS,
        "top_logprobs",
        "continue_final_message",
        "add_generation_prompt",
    ),
    "CompletionRequest": ("model", "prompt", *_SAMPLING_FIELDS, "prompt_logprobs"),
    "TokenizeChatRequest": ("model", "messages", "add_generation_prompt", "continue_final_message"),
    "TokenizeCompletionRequest": ("model", "prompt"),
    "DetokenizeRequest": ("model", "tokens"),
}
"""The body fields ``OpenAIServer`` sends, by vLLM request model (checked: vLLM ignores an unknown field)."""


@dataclass(frozen=True)
class VLLMOptions:
    """How to run a vLLM engine, in process or as a server (the model is given separately)."""

    tensor_parallel_size: int = setting(1, help="GPUs per engine (tensor parallelism).", ge=1)
    dtype: str = setting(
        "auto",
        help="""Weights/activations dtype (``auto`` = the checkpoint's, ``bfloat16``, ``float16``, ...). On vLLM's CPU
        build ``auto`` is ``float32`` where the CPU has no bfloat16 arithmetic (AVX2-only x86): 2-3x faster there.""",
        nonempty=True,
    )
    max_model_len: int | None = setting(None, help="Context window in tokens (None = the model's).", ge=1)
    gpu_memory_utilization: float = setting(
        DEFAULT_GPU_MEMORY_UTILIZATION,
        help="""Share of each GPU the engine may take (weights, activations, KV cache); lower it beside other
        engines. vLLM's CPU build sizes its KV cache by ``VLLM_CPU_KVCACHE_SPACE`` (``local.models``).""",
        gt=0,
        le=1,
    )
    enable_prefix_caching: bool = setting(
        True, help="Reuse the KV cache of shared prompt prefixes (the long judge template is shared by every request)."
    )
    enforce_eager: bool | None = setting(
        None,
        help="Skip CUDA graphs / compilation: faster start, slower generation. None: eager on vLLM's CPU build.",
    )
    seed: int = setting(0, help="Engine seed (per-request seeds come from ``SamplingConfig.seed``; GPU builds only).")
    tokenizer_mode: str = setting(
        "hf",
        help="""``hf`` (the Hugging Face tokenizer and chat template, as rendered in process) or ``mistral``
        (``mistral_common``, for models with only Mistral's tokenizer files; not tested here).""",
        choices=TOKENIZER_MODES,
        note="vLLM's 'auto' may switch to mistral_common and render chat unlike the in-process path",
    )
    max_logprobs: int = setting(
        LOGPROBS,
        help="Most logprobs a request may ask for; at least ``LOGPROBS`` (the top-20 prom-reward reads).",
        ge=LOGPROBS,
        note=f"prom-reward reads the top {LOGPROBS}",
    )
    engine_options: Mapping[str, Any] = setting(
        factory=dict, help="Other ``vllm.LLM`` keywords, in process only (a server takes ``ServeConfig.extra_args``)."
    )

    def __post_init__(self) -> None:
        check(self)
        taken = sorted(set(self.engine_options) & {k for k, _ in ENGINE_FLAGS})
        if taken:
            raise ConfigError(
                f"engine_options sets {taken}, which VLLMOptions sets itself; pass them as "
                f"VLLMOptions fields (e.g. {taken[0]}=...)"
            )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> VLLMOptions:
        """Options from keyword settings; an unknown name lists the valid ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(settings) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown vLLM engine option(s) {unknown}; valid: {', '.join(names)} "
                f"(other vllm.LLM keywords go in engine_options={{...}})"
            )
        return cls(**settings)

    def for_cpu(self) -> VLLMOptions:
        """These options on vLLM's CPU build: ``enforce_eager`` None becomes True, ``dtype`` as ``cpu_dtype`` says."""
        from prom_reward.local.models import cpu_dtype

        eager = True if self.enforce_eager is None else self.enforce_eager
        return dataclasses.replace(self, enforce_eager=eager, dtype=cpu_dtype(self.dtype))

    def _values(self, model: str) -> list[tuple[str, str, Any]]:
        values = {"model": model, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}
        return [(key, flag, values[key]) for key, flag in ENGINE_FLAGS if values[key] is not None]

    def llm_kwargs(self, model: str) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` for ``model`` (hub id or folder)."""
        return {**{key: value for key, _, value in self._values(model)}, **self.engine_options}

    def server_args(self, model: str) -> list[str]:
        """``api_server`` flags for ``model``: the same engine as ``llm_kwargs`` (not ``engine_options``)."""
        args: list[str] = []
        for _, flag, value in self._values(model):
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            else:
                args += [flag, str(value)]
        return args


ENGINE_FLAGS: tuple[tuple[str, str], ...] = tuple(
    (key, "--" + key.replace("_", "-"))
    for key in ("model", *(f.name for f in dataclasses.fields(VLLMOptions) if f.name != "engine_options"))
)
"""``vllm.LLM`` keyword (a ``VLLMOptions`` field, or ``model``) -> ``api_server`` flag (booleans ``--no-``)."""


def share_gpu_memory(first: float | None, second: float | None) -> tuple[float, float]:
    """GPU shares of two engines in one process (on one GPU): a share left None gets an equal part of what the
    given ones leave of ``DEFAULT_GPU_MEMORY_UTILIZATION``; together at most 1."""
    given = [s for s in (first, second) if s is not None]
    left = round(DEFAULT_GPU_MEMORY_UTILIZATION - sum(given), 6)
    if len(given) < 2 and left <= 0:
        raise ConfigError(
            f"gpu_memory_utilization: one engine takes {given[0]} of the GPU, which leaves nothing "
            f"of {DEFAULT_GPU_MEMORY_UTILIZATION} for the other engine in this process; set both "
            "shares (e.g. judge 0.45, calibration 0.45)"
        )
    part = round(left / (2 - len(given)), 6) if len(given) < 2 else 0.0
    a = part if first is None else first
    b = part if second is None else second
    if a + b > 1:
        raise ConfigError(
            f"gpu_memory_utilization: the two engines in this process share one GPU, but their "
            f"shares {a} + {b} pass 1; lower them (e.g. 0.45 each)"
        )
    return a, b


def sampling_kwargs(s: SamplingConfig, n: int, *, per_request_seed: bool) -> dict[str, Any]:
    """``vllm.SamplingParams`` keywords of a judge request (``per_request_seed=False`` drops the seed)."""
    kwargs: dict[str, Any] = dict(
        n=n,
        temperature=s.temperature,
        top_p=s.top_p,
        repetition_penalty=s.repetition_penalty,
        max_tokens=s.max_tokens,
        logprobs=s.logprobs,
        stop=list(s.stop) or None,
    )
    if s.top_k != -1:
        kwargs["top_k"] = s.top_k
    if s.seed is not None and per_request_seed:
        kwargs["seed"] = s.seed
    return kwargs


def teacher_forcing_kwargs(top_k: int) -> dict[str, Any]:
    """``vllm.SamplingParams`` keywords of teacher forcing: the prompt's top-``top_k`` logprobs, one token."""
    return dict(max_tokens=1, temperature=0.0, prompt_logprobs=top_k)
