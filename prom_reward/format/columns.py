"""Which column of a row holds each thing the judge reads (``--instruction-col`` ...; None reads the default
names, ``DEFAULTS``), and the text the judge sees in it: the one reading of columns for jobs, report and server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prom_reward.errors import InputError
from prom_reward.format.conversation import completion_text, prompt_text

DEFAULTS: dict[str, tuple[str, ...]] = {
    "instruction_column": ("instruction", "prompt"),
    "response_column": ("response", "completion"),
    "response_a_column": ("response_a", "chosen"),
    "response_b_column": ("response_b", "rejected"),
    "prompt_column": ("prompt",),
    "completions_column": ("completions",),
    "completion_column": ("completion",),
    "reference_column": ("reference_answer",),
    "rubric_column": ("rubric",),
    "checklist_column": ("checklist",),
    "baseline_column": ("baseline",),
    "source_column": ("source",),
}
"""A column option's default names: (prom-reward's, TRL's)."""

_INSTRUCTIONS = ("instruction_column", "prompt_column")
"""The options whose message lists are prompts (``prompt_text``); the others' are completions."""


def column_flag(option: str) -> str:
    """The command-line flag of a column option: ``instruction_column`` -> ``--instruction-col``."""
    return f"--{option.removesuffix('_column').replace('_', '-')}-col"


def find_column(
    data: Mapping[str, Any],
    option: str,
    name: str | None,
    where: str,
    *,
    required: bool = True,
    flag: str | None = None,
    index: int | None = None,
) -> str | None:
    """The column of ``data`` (one row, at ``where``) read for ``option``: ``name``, else the one of ``DEFAULTS`` the
    row has (None for a missing optional column); ``flag``: the fix's spelling of the option.

    >>> find_column({"prompt": "q"}, "checklist_column", "nosuch", "row 0", required=False)
    Traceback (most recent call last):
    prom_reward.errors.InputError: row 0: column 'nosuch' missing, which checklist_column names (columns: ...
    """
    flag = flag or "{" + option + "}"  # a message's mention: the flag on the command line, the keyword in Python
    defaults = DEFAULTS[option]
    if name is not None and name != defaults[0]:
        if name in data:
            return name
        field = name
        message = f"column {name!r} missing, which {{{option}}} names (columns: {sorted(data)}); fix: name one of its "
        message += f"columns with {flag}"
    else:
        found = [n for n in (defaults if name is None else (name,)) if n in data]
        if len(found) == 1:
            return found[0]
        field, *trl = defaults if name is None else (name,)
        if found:
            what = option.removesuffix("_column").replace("_a", " A").replace("_b", " B").replace("_", " ")
            message = (
                f"columns {field!r} and {trl[0]!r} both hold the {what}, which one to judge is ambiguous; fix: name "
                f"the one to judge with {flag}: {field!r} or {trl[0]!r}"
            )
        elif not required:
            return None
        else:
            nor = f" (nor TRL's {trl[0]!r}; " if trl else " ("
            message = f"column {field!r} missing{nor}columns: {sorted(data)}); fix: name the right one with {flag}"
    raise InputError(f"{where}: {message}", index=index, field=field, mentions=(option,))


def column_text(
    data: Mapping[str, Any], name: str, option: str, where: str, *, flag: str | None = None, index: int | None = None
) -> Any:
    """The value of column ``name`` as the judge reads it: a message list made text (``InputError`` naming the row
    and column when it is not one), any other value as it is.

    >>> column_text({"prompt": [{"role": "user", "content": "2+2?"}]}, "prompt", "instruction_column", "row 0")
    '2+2?'
    """
    value = data[name]
    if not isinstance(value, list):
        return value
    render = prompt_text if option in _INSTRUCTIONS else completion_text
    try:
        return render(value, index)
    except InputError as e:
        detail = str(e).removeprefix(f"item {index}: ") if index is not None else str(e)
        raise InputError(
            f"{where}: column {name!r}: {detail}; fix: give text or a list of {{role, content}} messages, or name "
            f"the right column with {flag or '{' + option + '}'}",
            index=index,
            field=name,
            mentions=(option,),
        ) from None
