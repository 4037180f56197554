"""``RewardSample``: one (prompt, completion) to reward, the one sample model of every reward path, and its
judge-ready form (``PrometheusReward.resolve``)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from prom_reward.errors import InputError
from prom_reward.format.conversation import completion_text

SAMPLE_COLUMNS = {  # the ``RewardSample`` fields a dataset column sets, and the ``RewardConfig`` setting naming it
    "reference_answer": "reference_column",
    "rubric": "rubric_column",
    "instruction": "instruction_column",
    "baseline": "baseline_column",
    "checklist": "checklist_column",
}


@dataclass(frozen=True)
class RewardSample:
    """One completion to reward, as the trainer gave it (or, resolved, as the judge will see it)."""

    prompt: Any  # the prompt as the trainer has it (a string or a message list); equal prompts are one group
    response: Any  # the completion (a string, or a message list for conversational data)
    reference_answer: str | None = None  # reference answer for this sample (None: the reward's default)
    rubric: Any = None  # rubric for this sample (None: the reward's default); a ``Rubric`` once resolved
    instruction: str | None = None  # text to show the judge as the instruction instead of the prompt
    baseline: Any = None  # ``pairwise_reference``: the response this one is compared with
    checklist: Any = None  # its checklist of criteria (None: judged by its rubric); ``Criterion``s once resolved

    @property
    def group(self) -> Hashable:
        """The key of the prompt, one per group: the string itself, or the canonical JSON of a message list."""
        return self.prompt if isinstance(self.prompt, str) else json.dumps(self.prompt, sort_keys=True, default=str)


def samples_from_columns(
    prompts: Sequence[Any], completions: Sequence[Any], columns: dict[str, Sequence[Any] | None]
) -> list[RewardSample]:
    """``RewardSample``s from TRL-style columns (field -> one value per completion, or None)."""
    n = len(prompts)
    if len(completions) != n:
        raise InputError(
            f"got {len(prompts)} prompts but {len(completions)} completions; TRL passes one prompt per completion",
            field="completions",
        )
    values = {name: column_values(name, column, n) for name, column in columns.items() if column is not None}
    return [
        RewardSample(prompt=p, response=c, **{k: v[i] for k, v in values.items()})
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
    ]


def column_values(name: str, column: Any, n: int, *sizes: int) -> list[Any]:
    """A column's values, one per completion (``n``, or one of ``sizes``); None: ``n`` Nones."""
    if column is None:
        return [None] * n
    if not isinstance(column, (list, tuple)) or len(column) not in (n, *sizes):
        size = len(column) if hasattr(column, "__len__") else "?"
        raise InputError(
            f"column {name!r}: expected one value per completion ({n}), got {type(column).__name__} of length {size}",
            field=name,
        )
    return list(column)


def response_text(response: Any) -> str:
    """A response's text for length statistics ("" when it is not text: that sample failed alone)."""
    try:
        return completion_text(response)
    except InputError:
        return ""
