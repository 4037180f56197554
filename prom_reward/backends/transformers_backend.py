"""The ``transformers`` backend: plain ``model.generate`` in batches (CPU-friendly, no vLLM needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
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
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.errors import BackendError, ConfigError


class TransformersBackend(InProcessEngine):
    """A Hugging Face causal LM (``model``: a folder, hub id or loaded ``PreTrainedModel``; ``tokenizer``: one, its
    folder, or None for the model's) on ``device`` in ``dtype`` (``auto``: the checkpoint's; float32 on a CPU
    without bfloat16 arithmetic), ``batch_size`` requests per ``model.generate``; ``max_model_len`` (default
    ``max_position_embeddings``) is the context it reports; ``wire`` and ``system_role`` as ``InProcessEngine`` says."""

    name = "transformers"
    gpu_memory_share = None  # the weights sit where torch puts them

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        wire: str = "chat",
        system_role: bool | None = None,
        device: str = "cpu",
        dtype: Any = "auto",
        batch_size: int = 8,
        max_model_len: int | None = None,
    ) -> None:
        from transformers import AutoTokenizer

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"expected an int >= 1, got {batch_size!r}; fix: give an int >= 1", "batch_size")
        if max_model_len is not None and (not isinstance(max_model_len, int) or max_model_len < 1):
            raise ConfigError(
                f"expected {{None}} or an int >= 1, got {max_model_len!r}; fix: give an int >= 1",
                "max_model_len",
                ("None",),
            )
        self.wire = wire_format(wire)
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            source = str(tokenizer) if tokenizer is not None else getattr(model, "name_or_path", model)
            if not source or not isinstance(source, (str, Path)):
                raise ConfigError("a loaded model without name_or_path needs tokenizer=<tokenizer or folder>")
            tokenizer = AutoTokenizer.from_pretrained(str(source))
        self.tokenizer, self.device, self.batch_size, self.max_model_len = tokenizer, device, batch_size, max_model_len
        self.model: Any = None
        self._detect_system_role(system_role)
        self._begin(lambda: self._start(model, dtype), wait=running_loop() is None)

    def _start(self, model: Any, dtype: Any) -> None:
        """Load the weights (in the worker thread) and read the ids that end or pad a sample."""
        if isinstance(model, (str, Path)):
            import torch
            from transformers import AutoModelForCausalLM

            if str(self.device).startswith("cpu"):
                from prom_reward.local.models import cpu_dtype

                dtype = cpu_dtype(dtype)
            if isinstance(dtype, str) and dtype != "auto":
                dtype = getattr(torch, dtype, None) or dtype
            try:
                model = AutoModelForCausalLM.from_pretrained(str(model), dtype=dtype)
            except (OSError, ValueError) as e:
                raise ConfigError(f"could not load a causal LM from {str(model)!r}: {e}") from e
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        self._eos = {int(i) for i in eos_ids if i is not None}
        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else model.generation_config.pad_token_id
        self._pad = int(pad if pad is not None else min(self._eos))
        self.model = model.to(self.device).eval()

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its model as ``str(model)`` (the loaded module's text, as stores have always keyed it: so read once the
        weights are loaded) and wire."""
        self._started.result()
        return make_fingerprint(self.name, self.model, self.wire.name)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self._ready()
        groups: dict[tuple[SamplingConfig, int], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.sampling, r.n), []).append(i)
        results: list[GenerationResult | None] = [None] * len(requests)
        for (sampling, n), indices in groups.items():
            if sampling.seed is not None:
                import torch

                torch.manual_seed(sampling.seed)
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                try:
                    outs = self._batch([self._ids(requests[i]) for i in chunk], sampling, n)
                except (RuntimeError, ValueError) as e:
                    raise BackendError(f"model.generate failed on requests {chunk}: {e}") from e
                for i, out in zip(chunk, outs, strict=True):
                    results[i] = out
        return [r for r in results if r is not None]

    def _batch(self, prompts: list[list[int]], s: SamplingConfig, n: int) -> list[GenerationResult]:
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self._pad] * (width - len(p)) + p for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        sample = s.temperature > 0
        k = n if sample else 1  # greedy samples are all the same
        options: dict[str, Any] = dict(
            # logits of every step cost rows x vocab x steps of memory: only when logprobs are asked for
            max_new_tokens=s.max_tokens,
            num_return_sequences=k,
            do_sample=sample,
            output_logits=s.logprobs is not None,
            return_dict_in_generate=True,
            pad_token_id=self._pad,
            eos_token_id=sorted(self._eos),
            repetition_penalty=s.repetition_penalty,
        )
        if sample:
            options.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k != -1 else 0)
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        if s.stop:
            options.update(stop_strings=list(s.stop), tokenizer=self.tokenizer)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **options)
        new = out.sequences[:, width:].tolist()
        logits = out.logits if s.logprobs is not None else None  # one [rows, vocab] tensor per step
        results = []
        for p, prompt in enumerate(prompts):
            rows = [p * k + j for j in range(k)]
            samples = [self._completion(new[r], None if logits is None else [x[r] for x in logits], s) for r in rows]
            results.append(GenerationResult(tuple(samples * (n // k)), prompt_tokens=len(prompt)))
        return results

    def _completion(self, tokens: list[int], logits: list[Any] | None, s: SamplingConfig) -> Completion:
        end = next((t + 1 for t, tok in enumerate(tokens) if tok in self._eos), None)
        finish = "stop" if end is not None else "length"
        tokens = tokens[:end] if end is not None else tokens
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        hits = [(text.find(stop), stop) for stop in s.stop if stop in text]
        if hits:
            at, stop = min(hits)
            text, finish = text[:at], "stop"
            # keep the tokens up to the one that completed the stop string
            keep = next(
                m
                for m in range(1, len(tokens) + 1)
                if stop in self.tokenizer.decode(tokens[:m], skip_special_tokens=True)
            )
            tokens = tokens[:keep]
        lps = None
        if logits is not None:
            lps = tuple(self._position(tok, logits[t], s.logprobs or 0) for t, tok in enumerate(tokens))
        return Completion(text=text, logprobs=lps, finish_reason=finish, completion_tokens=len(tokens))

    def _position(self, token: int, logits: Any, k: int) -> TokenLogprobs:
        row = logits.float().log_softmax(-1)
        values, ids = row.topk(k) if k else (row[:0], row[:0].long())
        alternatives = [
            (self.tokenizer.decode([tid]), lp) for lp, tid in zip(values.tolist(), ids.tolist(), strict=True)
        ]
        return position(self.tokenizer.decode([token]), float(row[token]), alternatives)

    def _forced(self, plans: list[tuple[list[int], int]], top_k: int) -> list[tuple[TokenLogprobs, ...]]:
        """One forward pass per request: the logits of the positions that predict the continuation."""
        import torch

        out = []
        for ids, size in plans:
            with torch.no_grad():
                logits = self.model(input_ids=torch.tensor([ids], device=self.device)).logits[0]
            start = len(ids) - size
            out.append(tuple(self._position(ids[start + j], logits[start - 1 + j], top_k) for j in range(size)))
        return out

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        if self.max_model_len is not None:
            return self.max_model_len
        await self._astarted()
        value = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return int(value) if value else None

    def _stop(self) -> None:
        self.model = None  # its memory is freed once nothing else holds it
