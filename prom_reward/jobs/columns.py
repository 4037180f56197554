"""Which input column holds each thing a ``grade`` or ``compare`` job reads, and the text the judge sees in it.

A column option given (``--instruction-col``, ``instruction_column=``) names the one column read. Left out
(None), each row is read from whichever of the role's names it has: prom-reward's own, or TRL's
(``ROLES``): ``instruction`` or ``prompt``, ``response`` or ``completion``, ``response_a`` or ``chosen``,
``response_b`` or ``rejected``. A row with both names of one role is refused (which one is meant cannot be
told; the fix names the option), a row with neither names both; either way before anything is judged,
since the job checks its whole input first (``prom_reward.jobs.scan``). A value that is a TRL
conversational message list becomes text as the rewards make it (``prom_reward.format.conversation``:
``prompt_text`` for the instruction, ``completion_text`` for a response). ``text_item`` builds a row's item
(``GradeItem``, ``PairItem``) from those columns; a failed check names the row, the column and the option.

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

from collections.abc import Callable
from typing import Any, TypeVar

from prom_reward.errors import InputError
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.format.rubrics import Rubric
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import missing_column, option_flag, row_error

ROLES: dict[str, tuple[str, str]] = {
    "instruction_column": ("instruction", "prompt"),
    "response_column": ("response", "completion"),
    "response_a_column": ("response_a", "chosen"),
    "response_b_column": ("response_b", "rejected"),
}
"""A column option's default names: (prom-reward's, TRL's)."""

T = TypeVar("T")


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


def role_columns(row: SourceRow, kind: Any, options: tuple[str, ...]) -> dict[str, str]:
    """The column of ``row`` read for each of ``options`` (column options of the job ``kind``: ``column``), and
    ``kind``'s ``reference_column``."""
    names = {o: column(row, getattr(kind, o), o) for o in options}
    names["reference_column"] = kind.reference_column
    return names


def text_item(row: SourceRow, names: dict[str, str], build: Callable[..., T], rubric: Rubric) -> T:
    """The item of ``row``: ``build(*texts, rubric, reference)``, the texts read from the columns ``names``
    (``role_columns``) in order; the item's own check fails as an ``InputError`` naming the row, the column and
    the option that renames it."""
    options = [o for o in names if o != "reference_column"]
    texts = [judge_text(row, names[o], o) for o in options]  # its errors name the row already
    try:
        return build(*texts, rubric, row.data.get(names["reference_column"]))
    except InputError as e:
        option = "reference_column" if e.field == "reference_answer" else f"{e.field}_column"
        option = option if option in names else "instruction_column"
        raise row_error(row, names[option], option_flag(option), str(e)) from None
