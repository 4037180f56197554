"""Which input column holds each thing a ``grade`` or ``compare`` job reads, and the text the judge sees in it.

A column option given (``--instruction-col``, ``instruction_column=``) names the one column read. Left out
(None), each row is read from whichever of the role's names it has: prom-reward's own, or TRL's
(``ROLES``): ``instruction`` or ``prompt``, ``response`` or ``completion``, ``response_a`` or ``chosen``,
``response_b`` or ``rejected``. A row with both names of one role is refused (which one is meant cannot be
told; the fix names the option), a row with neither names both; either way before anything is judged,
since the job checks its whole input first (``prom_reward.jobs.scan``). A value that is a TRL
conversational message list becomes text as the rewards make it (``prom_reward.format.conversation``:
``prompt_text`` for the instruction, ``completion_text`` for a response).

Example:
    >>> from prom_reward.jobs.source import SourceRow
    >>> row = SourceRow(0, "in.jsonl:1", {"prompt": [{"role": "user", "content": "2+2?"}], "completion": "4"})
    >>> name = column(row, None, "instruction_column"); name
    'prompt'
    >>> judge_text(row, name, "instruction_column")
    '2+2?'
    >>> both = SourceRow(1, "in.jsonl:2", {"instruction": "a", "prompt": "b", "response": "c"})
    >>> try:
    ...     column(both, None, "instruction_column")
    ... except InputError as e:
    ...     print(str(e).split(";")[0])
    in.jsonl:2: row 1: columns 'instruction' and 'prompt' both hold the instruction, which one to judge is ambiguous
"""

from __future__ import annotations

from typing import Any

from prom_reward.errors import InputError
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import missing_column, option_flag, row_error

ROLES: dict[str, tuple[str, str]] = {
    "instruction_column": ("instruction", "prompt"),
    "response_column": ("response", "completion"),
    "response_a_column": ("response_a", "chosen"),
    "response_b_column": ("response_b", "rejected"),
}
"""A column option's default names: (prom-reward's, TRL's)."""


def _what(option: str) -> str:
    return option.removesuffix("_column").replace("_a", " A").replace("_b", " B")  # "response A"


def column(row: SourceRow, given: str | None, option: str) -> str:
    """The column of ``row`` that holds ``option``'s role: ``given`` when set, else the one of ``ROLES[option]``
    the row has (``InputError`` naming the row, the columns and the flag when it has none or both)."""
    if given is not None:
        if given not in row.data:
            raise missing_column(row, given, option_flag(option))
        return given
    ours, trl = ROLES[option]
    found = [name for name in (ours, trl) if name in row.data]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(
            f"{row.where}: row {row.id}: column {ours!r} missing (nor TRL's {trl!r}; columns: {sorted(row.data)}); "
            f"fix: name the right one with {option_flag(option)}",
            index=row.id,
            field=ours,
        )
    raise InputError(
        f"{row.where}: row {row.id}: columns {ours!r} and {trl!r} both hold the {_what(option)}, which one to judge "
        f"is ambiguous; fix: name the one to judge with {option_flag(option)}: {ours!r} or {trl!r}",
        index=row.id,
        field=ours,
    )


def judge_text(row: SourceRow, name: str, option: str) -> Any:
    """The value of column ``name``, a message list made text (``prompt_text`` for the instruction,
    ``completion_text`` for a response); any other value as it is (the item check names its type)."""
    value = row.data[name]
    if not isinstance(value, list):
        return value
    render = prompt_text if option == "instruction_column" else completion_text
    try:
        return render(value, row.id)
    except InputError as e:
        raise row_error(
            row, name, option_flag(option), f"{e}; fix: give text or a list of {{role, content}} messages"
        ) from None
