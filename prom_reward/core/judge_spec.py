"""``JudgeSpec``: one run's judge (format, model, URLs, key, backend, wire and sampling), declared once; the CLI's
judge flags, the rewards' judge options, verl's and the benchmarks' judges are each one, read by every surface.

Example:
    >>> spec = JudgeSpec.of({"backend": "openai", "base_url": "http://j:8000/v1", "api_key": "k"}, max_tokens=64)
    >>> spec.server, spec.judge_server.api_key, spec.kwargs()["sampling"], spec.judge_format.name
    (('http://j:8000/v1',), 'k', {'max_tokens': 64}, 'prometheus2')
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prom_reward.backends.base import JudgeServer, api_key_of
from prom_reward.backends.factory import BACKENDS
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.presets import default_format
from prom_reward.core.sampler import FORCE_POLICIES
from prom_reward.declared import check, declared, setting
from prom_reward.errors import BackendError, ConfigError
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, get_judge_format

RENAMED = {"base_url": "server", "expected_score": "expected", "truncate_response": "truncate"}  # keyword -> field
ENGINE = ("max_model_len", "tensor_parallel_size", "enforce_eager", "gpu_memory_utilization")  # vLLM's options


@dataclass(frozen=True)
class JudgeSpec:
    """One run's judge. ``PrometheusJudge(**spec.kwargs())`` builds it; ``options`` holds its other keywords."""

    model: str | None = setting(
        None,
        help="hub id, local folder, or preset (e.g. prometheus-7b-v2.0); with --server the served model (default: "
        "the one the server serves, asked once)",
    )
    server: tuple[str, ...] = setting((), help="OpenAI-compatible base URL (repeatable)")
    backend: str = setting("vllm", choices=tuple(BACKENDS.names()), help="in-process engine for --model (default vllm)")
    endpoint: str = setting(
        "chat",
        choices=("chat", "completions"),
        help="--server endpoint: chat (/chat/completions) or completions (/completions; needed for --wire inst)",
    )
    wire: str | None = setting(
        None,
        choices=(None, "chat", "inst", "raw"),
        help="prompt wrapping: chat template, literal Mistral [INST], or raw text (default: the preset's, else chat)",
    )
    format: str | JudgeFormat | None = setting(
        None,
        help=f"judge format: the prompts and verdicts of the judge model ({', '.join(JUDGE_FORMATS)}, or a .yaml "
        "file; docs/formats.md); default: the preset's, else prometheus2",
    )
    num_samples: int = setting(1, ge=1, help="samples per item; the score is their mean (default 1)")
    max_tokens: int | None = setting(None, ge=1, help="judge output tokens (default: the preset's, else 1024)")
    temperature: float | None = setting(None, ge=0, help="sampling temperature (default 1.0, the papers')")
    expected: bool = setting(False, help="request logprobs; write P(1..5) and the expected score")
    force_verdict: str | None = setting(
        None,
        choices=(None, *FORCE_POLICIES),
        help="when to read a verdict the judge did not write from its next-token distribution (counted): cut "
        "(outputs cut at --max-tokens), always (every output without a verdict) or never; default: the preset's "
        "policy, else cut",
    )
    truncate: bool = setting(False, help="shorten over-long responses instead of failing")
    max_model_len: int | None = setting(
        None,
        ge=1,
        help="the judge's context length: vLLM's engine's (default: the model's), or a server's (default: "
        "the one it reports)",
    )
    tensor_parallel_size: int = setting(1, ge=1, help="vLLM: GPUs per engine (default 1)")
    enforce_eager: bool | None = setting(
        None,
        help="vLLM: no CUDA graphs / compilation: faster start, slower generation (default: eager on vLLM's CPU "
        "build, compiled on a GPU)",
    )
    gpu_memory_utilization: float | None = setting(
        None, gt=0, le=1, help="vLLM: share of the GPU the in-process engine takes (default 0.9)"
    )
    api_key: str | None = field(default=None, repr=False)
    """The judge server's key (given, else ``$PROM_REWARD_API_KEY``, else ``$OPENAI_API_KEY``): every request's."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """The other ``PrometheusJudge`` keywords (``sampling``, ``preset``, ``store``, a scripted backend's ...)."""

    def __post_init__(self) -> None:
        server = (self.server,) if isinstance(self.server, str) else self.server
        object.__setattr__(self, "server", tuple(u.rstrip("/") for u in server))
        if self.server:
            object.__setattr__(self, "backend", "openai")
            object.__setattr__(self, "api_key", api_key_of(self.api_key))
        check(self)
        sampling = self.options.get("sampling")
        if sampling is not None and not isinstance(sampling, (Mapping, SamplingConfig)):
            raise ConfigError(
                f"expected a mapping of sampling options (e.g. {{temperature: 0}}), got {type(sampling).__name__}; "
                "fix: give sampling: {...}",
                "sampling",
            )

    @classmethod
    def of(cls, options: Mapping[str, Any] | None = None, **given: Any) -> JudgeSpec:
        """The spec of ``PrometheusJudge`` keyword ``options`` (``base_url`` is ``server``, ``expected_score``
        ``expected``, ``truncate_response`` ``truncate``), with the fields ``given`` (not None) over them."""
        names = {d.name for d in declared(cls)} | {"api_key"}
        fields: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in (options or {}).items():
            name = RENAMED.get(key, key)
            if name in names and not (name == "backend" and not isinstance(value, str)):
                fields[name] = tuple(value) if name == "server" and not isinstance(value, str) else value
            else:
                rest[key] = value
        fields.update((k, v) for k, v in given.items() if v is not None)
        return cls(**fields, options=rest)

    @property
    def judge_format(self) -> JudgeFormat:
        """The judge format: ``format``, else the preset's of ``model``, else the default (the judge not built)."""
        return get_judge_format(self.format or default_format(self.model, self.options.get("preset")))

    @property
    def judge_server(self) -> JudgeServer | None:
        """The judge server every request asks, the start-up check first (None: an in-process judge)."""
        return JudgeServer(self.server, self.model, self.api_key) if self.server else None

    def kwargs(self) -> dict[str, Any]:
        """The ``PrometheusJudge`` keyword arguments of this spec (what ``--ray`` sends to each replica)."""
        out: dict[str, Any] = {"backend": self.backend}
        given = (("model", self.model), ("format", self.format), ("force_verdict", self.force_verdict))
        out.update((k, v) for k, v in given if v is not None)
        unless = (("num_samples", self.num_samples, 1), ("expected_score", self.expected, False))
        out.update((k, v) for k, v, default in (*unless, ("truncate_response", self.truncate, False)) if v != default)
        flat = {k: v for k, v in (("max_tokens", self.max_tokens), ("temperature", self.temperature)) if v is not None}
        sampling = self.options.get("sampling") or {}
        sampling = sampling.merged(flat) if isinstance(sampling, SamplingConfig) else {**sampling, **flat}
        if sampling:
            out["sampling"] = sampling
        if self.wire is not None:
            out["wire"] = self.wire
        if self.server:
            out["base_url"] = list(self.server)
            if self.wire is not None or self.endpoint != "chat":  # else the preset's (completions for its inst wire)
                out["endpoint"] = self.endpoint
            asked = (("max_model_len", self.max_model_len), ("api_key", self.api_key))
            out.update((k, v) for k, v in asked if v is not None)
        elif self.backend in ("vllm", "transformers"):
            engine = {name: getattr(self, name) for name in ENGINE if self.backend == "vllm" or name == "max_model_len"}
            out.update((k, v) for k, v in engine.items() if v is not None and (k, v) != ("tensor_parallel_size", 1))
        return {**out, **{k: v for k, v in self.options.items() if k != "sampling"}}

    async def aresolve(self, timeout: float = 10.0) -> JudgeSpec:
        """This spec with the model its server serves, asked once (``GET /models``) when it names none: the
        start-up check, every request and the store key then read the same model. A server not answering leaves
        it unnamed (its first request asks); a refused key raises ``JudgeConfigError``."""
        if not self.server or self.model is not None:
            return self
        server = OpenAIServer(list(self.server), endpoint=self.endpoint, api_key=self.api_key)
        deadline = time.monotonic() + timeout
        try:
            model = await server.aserved_model(deadline)
            context = self.max_model_len or await server.acontext_length(deadline)  # the same reply's
        except BackendError:
            return self
        finally:
            await server.aclose()
        return dataclasses.replace(self, model=model, max_model_len=context)

    def build(self) -> PrometheusJudge:
        """The ``PrometheusJudge`` of this spec."""
        return PrometheusJudge(**self.kwargs())
