"""Training examples rendered exactly as the judge will later be prompted.

A record becomes a ``JudgeExample`` (system prompt, filled template, target output) through the same
functions ``PrometheusJudge`` uses to build its requests (``prom_reward.core.items`` validation, marker
neutralisation of responses, ``render_absolute`` / ``render_relative``, the Prometheus 2 system
prompts). ``prompt_text`` then applies the base model's wire format (``chat``: its chat template, the
system prompt folded into the user turn when the template has no system role, as for Mistral/Mixtral;
``inst``; ``raw``), the very string the vLLM backend tokenizes. ``tokenize_example`` produces
``input_ids`` plus a ``completion_mask`` that is 1 only on the judge output and the end-of-sequence
token, so the loss falls on the judge's output tokens only.

Example:
    >>> from train_judge.data import PairRecord
    >>> ex = to_example(PairRecord("q", "a", "b", None, "[Is it right?]", "B is right.", "B"))
    >>> ex.kind, ex.completion, ex.user.endswith("###Feedback: ")
    ('relative', 'B is right. [RESULT] B', True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.core.items import absolute_items, relative_items
from prom_reward.core.judge import judge_request
from prom_reward.errors import ConfigError
from prom_reward.format.sanitize import neutralize
from prom_reward.format.wire import get_wire_format, template_accepts_system

from .data import FeedbackRecord, PairRecord


@dataclass(frozen=True)
class JudgeExample:
    """One rendered training example, before the wire format."""

    kind: Literal["absolute", "relative"]
    """Task kind."""
    system: str
    """The Prometheus 2 system prompt of the kind."""
    user: str
    """The filled template (ends with ``###Feedback: ``)."""
    completion: str
    """The target judge output (``feedback [RESULT] verdict``)."""


_DEFAULT_SAMPLING = SamplingConfig()


def to_example(record: FeedbackRecord | PairRecord) -> JudgeExample:
    """The example the judge would see for ``record`` (same validation and rendering as the judge)."""
    if isinstance(record, FeedbackRecord):
        item = absolute_items([record.instruction], [record.response], [record.rubric], [record.reference_answer])[0]
        item = dataclasses.replace(item, response=neutralize(item.response)[0])
        req = judge_request(item, _DEFAULT_SAMPLING)
        return JudgeExample("absolute", req.system, req.user, record.completion)
    if isinstance(record, PairRecord):
        rel = relative_items(
            [record.instruction], [record.response_a], [record.response_b], [record.rubric], [record.reference_answer]
        )[0]
        rel = dataclasses.replace(
            rel, response_a=neutralize(rel.response_a)[0], response_b=neutralize(rel.response_b)[0]
        )
        req = judge_request(rel, _DEFAULT_SAMPLING)
        return JudgeExample("relative", req.system, req.user, record.completion)
    raise ConfigError(f"expected a FeedbackRecord or PairRecord, got {type(record).__name__}")


def prompt_text(example: JudgeExample, tokenizer: Any, wire: str = "chat", *, system_role: bool | None = None) -> str:
    """The prompt string the judge backend sends for ``example`` under ``wire`` (``system_role``
    None: detected from the chat template, as the backends do)."""
    w = get_wire_format(wire)
    if w.uses_chat_template and system_role is None:
        system_role = template_accepts_system(tokenizer)
    return w.render(example.system, example.user, tokenizer, system_role=system_role)


def tokenize_example(
    example: JudgeExample,
    tokenizer: Any,
    wire: str = "chat",
    *,
    max_length: int | None = None,
    system_role: bool | None = None,
) -> dict[str, list[int]] | None:
    """``input_ids`` and ``completion_mask`` for ``example``; None when longer than ``max_length``.

    The prompt is tokenized alone, exactly as the vLLM backend does (special tokens added only when
    the wire text does not already carry them); the completion is tokenized without special tokens
    and closed by the tokenizer's EOS token (the chat template's end of turn for chat models).
    Over-long examples are dropped, never cut: a cut would remove the verdict.
    """
    w = get_wire_format(wire)
    text = prompt_text(example, tokenizer, wire, system_role=system_role)
    prompt_ids = list(tokenizer.encode(text, add_special_tokens=not w.uses_chat_template))
    completion_ids = list(tokenizer.encode(example.completion, add_special_tokens=False))
    if tokenizer.eos_token_id is None:
        raise ConfigError("the tokenizer has no eos_token; set one so the judge learns to stop")
    completion_ids.append(int(tokenizer.eos_token_id))
    if max_length is not None and len(prompt_ids) + len(completion_ids) > max_length:
        return None
    return {
        "input_ids": prompt_ids + completion_ids,
        "completion_mask": [0] * len(prompt_ids) + [1] * len(completion_ids),
    }
