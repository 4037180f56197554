"""Input rows for preference building: grouping, validation, and what the judge sees.

A wide row is ``{"prompt": str | messages, "completions": [str | messages, ...],
"reference_answer"?: str, "rubric"?: ...}`` (column names from ``PreferenceConfig``).
The long layout (one row per (prompt, completion)) is grouped into wide rows: consecutive
rows with an equal prompt form one group (sort the file by prompt first if they are scattered).

``validate_row`` turns a wide row into a ``PreferenceRow``: the original prompt and completions
(kept for the output, in their layout) plus the judge text (``prompt_text``/``completion_text``),
the resolved rubric and the reference answer. Anything wrong raises ``InputError`` naming the
row index and field, so a chunk is checked before it is sent to the judge.

Example:
    >>> cfg = PreferenceConfig(rubric="helpfulness")
    >>> rubrics = RubricResolver(cfg, need_scores=True)
    >>> r = validate_row(0, {"prompt": "Hi?", "completions": ["Hello.", "Go away."]}, cfg, rubrics)
    >>> r.responses, r.conversational
    (('Hello.', 'Go away.'), False)
    >>> [len(g["completions"]) for g in group_long([{"prompt": "p", "completion": "a"},
    ...                                               {"prompt": "p", "completion": "b"}], cfg)]
    [2]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from prom_reward.format.conversation import completion_text, is_conversational, prompt_text
from prom_reward.errors import InputError, PromRewardError
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.format.rubrics import Rubric, get_rubric


@dataclass(frozen=True)
class PreferenceRow:
    """One validated input row (one prompt with its completions)."""

    index: int
    """Position of the row in the (grouped) input: the ``source_index`` of its pairs."""
    prompt: Any
    """The prompt as given (string or message list), copied to the output."""
    completions: tuple[Any, ...]
    """The completions as given (strings or message lists), copied to ``chosen``/``rejected``."""
    instruction: str
    """What the judge reads as the instruction."""
    responses: tuple[str, ...]
    """What the judge reads for each completion."""
    rubric: Rubric
    """The resolved rubric."""
    reference_answer: str | None
    """Optional reference answer."""
    conversational: bool
    """True when the prompt is a message list (then every completion is one too)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The ``keep_columns`` values."""


def group_long(rows: Iterable[dict[str, Any]], cfg: PreferenceConfig) -> Iterator[dict[str, Any]]:
    """Group long-layout rows (one completion each) into wide rows, streaming."""
    group: dict[str, Any] | None = None
    for i, row in enumerate(rows):
        for col in (cfg.prompt_column, cfg.completion_column):
            if col not in row:
                raise InputError(f"long row {i}: column {col!r} missing (columns: {sorted(row)})",
                                 index=i, field=col)
        if group is not None and row[cfg.prompt_column] == group[cfg.prompt_column]:
            group[cfg.completions_column].append(row[cfg.completion_column])
            continue
        if group is not None:
            yield group
        group = {k: v for k, v in row.items() if k != cfg.completion_column}
        group[cfg.completions_column] = [row[cfg.completion_column]]
    if group is not None:
        yield group


class RubricResolver:
    """Resolves row rubrics once per distinct value (names, dicts, files)."""

    def __init__(self, cfg: PreferenceConfig, *, need_scores: bool) -> None:
        self.cfg = cfg
        self.need_scores = need_scores
        self._cache: dict[str, Rubric] = {}
        self.fixed = None if cfg.rubric is None else self._resolve(cfg.rubric, None, "rubric")

    def _resolve(self, value: Any, index: int | None, fieldname: str) -> Rubric:
        where = f"row {index}: " if index is not None else ""
        try:
            key = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        except TypeError:
            key = repr(value)
        if key not in self._cache:
            try:
                self._cache[key] = get_rubric(value)
            except PromRewardError as e:
                raise InputError(f"{where}{fieldname}: {e}", index=index, field=fieldname) from e
        rubric = self._cache[key]
        if self.need_scores and not rubric.has_scores:
            raise InputError(f"{where}{fieldname}: rubric {rubric.criteria[:60]!r} has no score descriptions; "
                             "best_vs_worst grades 1..5 and needs five (or use strategy='all_pairs')",
                             index=index, field=fieldname)
        return rubric

    def __call__(self, index: int, row: dict[str, Any]) -> Rubric:
        if self.fixed is not None:
            return self.fixed
        col = self.cfg.rubric_column
        if row.get(col) is None:
            raise InputError(f"row {index}: no rubric: column {col!r} is missing or None and no rubric was "
                             "given; pass rubric=NAME|FILE (--rubric) or fill the column", index=index, field=col)
        return self._resolve(row[col], index, col)


def _judge_text(fn: Any, value: Any, index: int, fieldname: str) -> str:
    try:
        return fn(value, index)
    except InputError as e:
        raise InputError(f"row {index}: {fieldname}: {e}", index=index, field=fieldname) from e


def validate_row(index: int, row: Any, cfg: PreferenceConfig, rubrics: RubricResolver) -> PreferenceRow:
    """Check one wide row and prepare it for the judge; raises InputError naming row and field."""
    if not isinstance(row, dict):
        raise InputError(f"row {index}: expected a dict, got {type(row).__name__}", index=index)
    for col in (cfg.prompt_column, cfg.completions_column, *cfg.keep_columns):
        if col not in row:
            option = {cfg.prompt_column: "prompt_column", cfg.completions_column: "completions_column"}.get(col)
            hint = f" (name the right one with {option}=...)" if option else ""
            raise InputError(f"row {index}: column {col!r} missing (columns: {sorted(row)}){hint}",
                             index=index, field=col)
    prompt, completions = row[cfg.prompt_column], row[cfg.completions_column]
    ccol = cfg.completions_column
    if not isinstance(completions, (list, tuple)) or len(completions) < 2:
        got = f"{len(completions)} item(s)" if isinstance(completions, (list, tuple)) else type(completions).__name__
        raise InputError(f"row {index}: {ccol} must be a list of at least 2 completions, got {got}",
                         index=index, field=ccol)
    instruction = _judge_text(prompt_text, prompt, index, cfg.prompt_column)
    conversational = not isinstance(prompt, str)
    responses = []
    for j, c in enumerate(completions):
        name = f"{ccol}[{j}]"
        if conversational and not is_conversational(c):
            raise InputError(f"row {index}: {name} must be a list of messages like the prompt, got "
                             f"{type(c).__name__}; DPO needs chosen/rejected in the prompt's layout",
                             index=index, field=name)
        if not conversational and not isinstance(c, str):
            raise InputError(f"row {index}: {name} must be a str like the prompt, got {type(c).__name__} "
                             f"({str(c)[:60]!r})", index=index, field=name)
        responses.append(_judge_text(completion_text, c, index, name))
    ref = row.get(cfg.reference_column)
    if ref is not None and not isinstance(ref, str):
        raise InputError(f"row {index}: {cfg.reference_column} must be a str or None, got {type(ref).__name__}",
                         index=index, field=cfg.reference_column)
    return PreferenceRow(
        index=index, prompt=prompt, completions=tuple(completions), instruction=instruction,
        responses=tuple(responses), rubric=rubrics(index, row),
        reference_answer=ref, conversational=conversational, extra={k: row[k] for k in cfg.keep_columns},
    )
