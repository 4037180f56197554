"""Which input column holds each thing a ``grade`` or ``compare`` job reads (its rubric included), and ``text_item``,
which builds a row's item from them; a failed check names the row, the column and the option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from prom_reward.errors import InputError
from prom_reward.format.columns import column_text, find_column
from prom_reward.format.rubrics import Rubric, RubricResolver
from prom_reward.jobs.source import SourceRow
from prom_reward.jobs.spec import row_error

T = TypeVar("T")


def column(row: SourceRow, given: str | None, option: str, *, required: bool = True) -> str | None:
    """The column of ``row`` that holds ``option``'s role; None only for an optional column it does not have."""
    return find_column(row.data, option, given, f"{row.where}: row {row.id}", required=required, index=row.id)


def resolve_rubric(rubrics: RubricResolver, row: SourceRow, given: str) -> Rubric:
    """The rubric of one row (its ``rubric_column`` ``given``, else the job's), errors naming the row's place."""
    name = column(row, given, "rubric_column", required=False)
    try:
        return rubrics(None if name is None else row.data[name], index=row.id, field=name or given)
    except InputError as e:
        raise e.at(row.where) from None


def role_columns(row: SourceRow, kind: Any, options: tuple[str, ...]) -> dict[str, str | None]:
    """The column of ``row`` read for each of ``options`` of the job ``kind``, and its optional reference column."""
    names: dict[str, str | None] = {o: column(row, getattr(kind, o), o) for o in options}
    names["reference_column"] = column(row, kind.reference_column, "reference_column", required=False)
    return names


def text_item(row: SourceRow, names: dict[str, str | None], build: Callable[..., T], rubric: Rubric) -> T:
    """The item of ``row``: ``build(*texts, rubric, reference)`` from the columns ``names``; the item's own check
    fails as an ``InputError`` naming the row, the column and the option."""
    options = [o for o in names if o != "reference_column"]
    where = f"{row.where}: row {row.id}"  # a message list is made text; its errors name the row already
    texts = [column_text(row.data, str(names[o]), o, where, index=row.id) for o in options]
    reference = names["reference_column"]
    try:
        return build(*texts, rubric, None if reference is None else row.data[reference])
    except InputError as e:
        option = "reference_column" if e.field == "reference_answer" else f"{e.field}_column"
        option = option if option in names else "instruction_column"
        raise row_error(row, str(names[option] or e.field), option, str(e)) from None
