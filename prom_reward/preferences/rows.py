"""Input rows for preference pairs: ``validate_row`` turns a wide row into a ``PreferenceRow`` (original layout
kept, the judge's text, rubric and reference), or raises ``InputError`` naming the row and field.

Example:
    >>> from prom_reward.format.resolve import RubricResolver
    >>> cfg = PreferenceConfig(rubric="helpfulness")
    >>> rubrics = RubricResolver(cfg.rubric, what="row")
    >>> r = validate_row(0, {"prompt": "Hi?", "completions": ["Hello.", "Go away."]}, cfg, rubrics)
    >>> r.responses, r.conversational
    (('Hello.', 'Go away.'), False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from prom_reward.checklist.criteria import Criterion, parse_checklist
from prom_reward.core.items import check_text
from prom_reward.errors import InputError
from prom_reward.format.columns import find_column
from prom_reward.format.conversation import completion_text, is_conversational, prompt_text
from prom_reward.format.resolve import RubricResolver
from prom_reward.format.rubrics import Rubric
from prom_reward.preferences.config import PreferenceConfig


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
    checklist: tuple[Criterion, ...] | None = None
    """The row's checklist (``checklist_column``), checked; None: its completions are graded by the rubric."""


def _judge_text(fn: Any, value: Any, index: int, fieldname: str, flag: str) -> str:
    try:
        text: str = fn(value, index)
        check_text(text, None, fieldname)
        return text
    except InputError as e:
        detail = re.sub(r"^item \d+: ", "", str(e))
        raise InputError(
            f"row {index}: column {fieldname!r}: {detail}; fix: give text or a list of "
            f"{{role, content}} messages, or name the right column with {flag}",
            index=index,
            field=fieldname,
        ) from e


def validate_row(
    index: int, row: Any, cfg: PreferenceConfig, rubrics: RubricResolver, ungraded: str | None = None
) -> PreferenceRow:
    """Check one wide row and prepare it for the judge; raises InputError naming row and field
    (``rubrics``: resolves ``cfg.rubric`` or the row's ``rubric_column``; ``ungraded``: why the judge cannot
    grade a checklist's criteria, the refusal of a row with one; None: it can)."""
    if not isinstance(row, dict):
        raise InputError(
            f"row {index}: expected a dict, got {type(row).__name__}; fix: give one JSON object per row", index=index
        )
    for col in (cfg.prompt_column, cfg.completions_column, *cfg.keep_columns):
        if col not in row:
            option = {
                cfg.prompt_column: "prompt_column",
                cfg.completions_column: "completions_column",
            }.get(col)
            hint = f"; fix: name the right one with {{{option}}}" if option else "; fix: drop it from --keep-col"
            if col == cfg.completions_column and cfg.completion_column in row:  # TRL's prompt/completion rows
                long = f"give --layout long (one row per {cfg.completion_column!r}, as in TRL's data)"
                hint = f"; fix: {long}, or{hint[6:]}"
            raise InputError(
                f"row {index}: column {col!r} missing (columns: {sorted(row)}){hint}",
                index=index,
                field=col,
                mentions=(option,) if option else (),
            )
    prompt, completions = row[cfg.prompt_column], row[cfg.completions_column]
    ccol = cfg.completions_column
    if not isinstance(completions, (list, tuple)):  # fewer than 2 is a row without pairs: skipped, counted
        raise InputError(
            f"row {index}: {ccol} must be a list of completions, got {type(completions).__name__}; fix: give a list "
            "(or --layout long: one row per completion)",
            index=index,
            field=ccol,
        )
    instruction = _judge_text(prompt_text, prompt, index, cfg.prompt_column, "--prompt-col")
    conversational = not isinstance(prompt, str)
    responses = []
    for j, c in enumerate(completions):
        name = f"{ccol}[{j}]"
        if conversational and not is_conversational(c):
            raise InputError(
                f"row {index}: {name} must be a list of messages like the prompt, got "
                f"{type(c).__name__}; fix: give the completions in the prompt's layout (DPO needs chosen/rejected "
                "in it)",
                index=index,
                field=name,
            )
        if not conversational and not isinstance(c, str):
            raise InputError(
                f"row {index}: {name} must be a str like the prompt, got {type(c).__name__} ({str(c)[:60]!r}); fix: "
                "give text",
                index=index,
                field=name,
            )
        responses.append(_judge_text(completion_text, c, index, name, "--completions-col"))
    for option in ("reference_column", "rubric_column", "checklist_column"):  # optional, but one a flag names is there
        find_column(row, option, getattr(cfg, option), f"row {index}", required=False, index=index)
    ref = row.get(cfg.reference_column)
    if ref is not None and not isinstance(ref, str):
        raise InputError(
            f"row {index}: {cfg.reference_column} must be a str or {{None}}, got {type(ref).__name__}; fix: give text, "
            "or name the right column with {reference_column}",
            index=index,
            field=cfg.reference_column,
            mentions=("None", "reference_column"),
        )
    try:
        if ref is not None:
            check_text(ref, None, cfg.reference_column)
    except InputError as e:
        what, _, how = str(e).rpartition("; ")
        raise InputError(
            f"row {index}: column {cfg.reference_column!r}: {what}; fix: {how}, or name the right column with "
            "{reference_column}",
            index=index,
            field=cfg.reference_column,
            mentions=("reference_column",),
        ) from None
    checklist = None
    if row.get(cfg.checklist_column) is not None:
        if ungraded is not None:  # every strategy grades a checklist's criteria: in a format that can
            raise InputError(f"row {index}: {ungraded}", index=index, field=cfg.checklist_column)
        if cfg.strategy != "best_vs_worst":
            raise InputError(
                f"row {index}: column {cfg.checklist_column!r}: a checklist scores each completion, and strategy "
                f"{cfg.strategy} compares them head to head; fix: give --strategy best_vs_worst, or drop the column",
                index=index,
                field=cfg.checklist_column,
            )
        try:
            checklist = parse_checklist(row[cfg.checklist_column])
        except InputError as e:
            raise InputError(
                f"row {index}: column {cfg.checklist_column!r}: {e}, or name the right column with "
                "{checklist_column}",
                index=index,
                field=cfg.checklist_column,
                mentions=("checklist_column",),
            ) from None
    return PreferenceRow(
        index=index,
        prompt=prompt,
        completions=tuple(completions),
        instruction=instruction,
        responses=tuple(responses),
        rubric=rubrics(row.get(cfg.rubric_column), index=index, field=cfg.rubric_column),
        reference_answer=ref,
        conversational=conversational,
        extra={k: row[k] for k in cfg.keep_columns},
        checklist=checklist,
    )
