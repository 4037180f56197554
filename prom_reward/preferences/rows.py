"""Input rows for preference pairs: ``validate_row`` turns a wide row into a ``PreferenceRow`` (the original layout
kept, the judge's text, rubric and reference), or raises ``InputError`` naming the row and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prom_reward.checklist.criteria import Criterion, parse_checklist
from prom_reward.core.items import check_text
from prom_reward.errors import InputError
from prom_reward.format.columns import find_column
from prom_reward.format.conversation import completion_text, is_conversational, prompt_text
from prom_reward.format.rubrics import Rubric, RubricResolver
from prom_reward.preferences.config import PreferenceConfig


@dataclass(frozen=True)
class PreferenceRow:
    """One validated input row: the prompt and completions as given, what the judge reads for them (``instruction``,
    ``responses``), the ``keep_columns`` values (``extra``) and the row's checklist, if any."""

    index: int
    """The ``source_index`` of its pairs."""
    prompt: Any
    completions: tuple[Any, ...]
    instruction: str
    responses: tuple[str, ...]
    rubric: Rubric
    reference_answer: str | None
    conversational: bool
    """The prompt and every completion are message lists."""
    extra: dict[str, Any] = field(default_factory=dict)
    checklist: tuple[Criterion, ...] | None = None


def _error(index: int, field: str | None, message: str, mentions: tuple[str, ...] = ()) -> InputError:
    return InputError(f"row {index}: {message}", index=index, field=field, mentions=mentions)


def _judge_text(fn: Any, value: Any, index: int, fieldname: str, flag: str) -> str:
    try:
        text: str = fn(value, index)
        check_text(text, None, fieldname)
        return text
    except InputError as e:
        detail = str(e).removeprefix(f"item {index}: ")
        fix = f"fix: give text or a list of {{role, content}} messages, or name the right column with {flag}"
        raise _error(index, fieldname, f"column {fieldname!r}: {detail}; {fix}") from e


def validate_row(
    index: int, row: Any, cfg: PreferenceConfig, rubrics: RubricResolver, ungraded: str | None = None
) -> PreferenceRow:
    """Check one wide row and prepare it for the judge (``InputError`` naming row and field); ``ungraded``: why the
    judge cannot grade a checklist, the refusal of a row with one."""
    if not isinstance(row, dict):
        raise _error(index, None, f"expected a dict, got {type(row).__name__}; fix: give one JSON object per row")
    for col in (cfg.prompt_column, cfg.completions_column, *cfg.keep_columns):
        if col not in row:
            option = next((o for o in ("prompt_column", "completions_column") if getattr(cfg, o) == col), None)
            hint = f"; fix: name the right one with {{{option}}}" if option else "; fix: drop it from --keep-col"
            if col == cfg.completions_column and cfg.completion_column in row:  # TRL's prompt/completion rows
                long = f"give --layout long (one row per {cfg.completion_column!r}, as in TRL's data)"
                hint = f"; fix: {long}, or{hint[6:]}"
            raise _error(
                index, col, f"column {col!r} missing (columns: {sorted(row)}){hint}", (option,) if option else ()
            )
    prompt, completions = row[cfg.prompt_column], row[cfg.completions_column]
    ccol = cfg.completions_column
    if not isinstance(completions, (list, tuple)):  # fewer than 2 is a row without pairs: skipped, counted
        got = type(completions).__name__
        fix = "fix: give a list (or --layout long: one row per completion)"
        raise _error(index, ccol, f"{ccol} must be a list of completions, got {got}; {fix}")
    instruction = _judge_text(prompt_text, prompt, index, cfg.prompt_column, "--prompt-col")
    conversational = not isinstance(prompt, str)
    responses = []
    for j, c in enumerate(completions):
        name = f"{ccol}[{j}]"
        if conversational and not is_conversational(c):
            fix = "fix: give the completions in the prompt's layout (DPO needs chosen/rejected in it)"
            raise _error(
                index, name, f"{name} must be a list of messages like the prompt, got {type(c).__name__}; {fix}"
            )
        if not conversational and not isinstance(c, str):
            got = f"{type(c).__name__} ({str(c)[:60]!r})"
            raise _error(index, name, f"{name} must be a str like the prompt, got {got}; fix: give text")
        responses.append(_judge_text(completion_text, c, index, name, "--completions-col"))
    for option in ("reference_column", "rubric_column", "checklist_column"):  # optional, but one a flag names is there
        find_column(row, option, getattr(cfg, option), f"row {index}", required=False, index=index)
    rcol, ref = cfg.reference_column, row.get(cfg.reference_column)
    if ref is not None and not isinstance(ref, str):
        fix = "fix: give text, or name the right column with {reference_column}"
        got = type(ref).__name__
        raise _error(index, rcol, f"{rcol} must be a str or {{None}}, got {got}; {fix}", ("None", "reference_column"))
    try:
        check_text("" if ref is None else ref, None, rcol)
    except InputError as e:
        what, _, how = str(e).rpartition("; ")
        raise _error(
            index,
            rcol,
            f"column {rcol!r}: {what}; fix: {how}, or name the right column with {{reference_column}}",
            ("reference_column",),
        ) from None
    checklist, lcol = None, cfg.checklist_column
    if row.get(lcol) is not None:
        if ungraded is not None:  # every strategy grades a checklist's criteria: in a format that can
            raise _error(index, lcol, ungraded)
        if cfg.strategy != "best_vs_worst":
            why = f"a checklist scores each completion, and strategy {cfg.strategy} compares them head to head"
            raise _error(index, lcol, f"column {lcol!r}: {why}; fix: give --strategy best_vs_worst, or drop the column")
        try:
            checklist = parse_checklist(row[lcol])
        except InputError as e:
            fix = "or name the right column with {checklist_column}"
            raise _error(index, lcol, f"column {lcol!r}: {e}, {fix}", ("checklist_column",)) from None
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
