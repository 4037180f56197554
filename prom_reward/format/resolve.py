"""``RubricResolver``: the one way every entry point turns rubric values into ``Rubric`` objects (each distinct
value once, a default where none, the format's fit check, ``InputError`` naming the item)."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import TYPE_CHECKING

from prom_reward.errors import InputError, PromRewardError
from prom_reward.format.rubrics import Rubric, RubricLike, get_rubric

if TYPE_CHECKING:
    from prom_reward.format.judge_format import JudgeFormat, Task


def rubric_key(value: object) -> Hashable:
    """A hashable key for a rubric value (equal values, equal keys): the value itself, or its canonical JSON."""
    if isinstance(value, (str, Rubric)):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


class RubricResolver:
    """Resolve rubric values to ``Rubric`` objects, once per distinct value: ``default`` for items that give none
    (None: each must), ``judge_format``'s fit check for ``task`` (None: none here), ``what`` an item is called in
    messages, ``missing_hint`` the fix for a missing rubric.

    >>> resolve = RubricResolver("helpfulness")
    >>> resolve(None, index=0).criteria[:8], resolve("honesty", index=1).criteria[:8]
    ('Does the', 'Does the')
    """

    def __init__(
        self,
        default: RubricLike | None = None,
        *,
        judge_format: JudgeFormat | None = None,
        task: Task = "absolute",
        what: str = "item",
        missing_hint: str = "pass a rubric (a built-in name, a Rubric, a dict or a .json/.yaml file)",
    ) -> None:
        self.judge_format, self.task = judge_format, task
        self.what = what
        self.missing_hint = missing_hint
        self._cache: dict[Hashable, Rubric] = {}
        self.default: Rubric | None = None if default is None else self.resolve(default, field="rubric")

    def resolve(self, value: RubricLike, *, index: int | None = None, field: str = "rubric") -> Rubric:
        """``value`` (not None) as a ``Rubric``; raises ``InputError`` naming ``index`` and ``field``."""
        where = f"{self.what} {index}: " if index is not None else ""
        key = rubric_key(value)
        rubric = self._cache.get(key)
        if rubric is None:
            try:
                rubric = get_rubric(value)
            except PromRewardError as e:
                named = "{" + field + "}" if not where else field  # an item's own rubric: no setting names it
                raise InputError(f"{where}{named}: {e}", index=index, field=field, mentions=(field,)) from e
            self._cache[key] = rubric
        problem = None if self.judge_format is None else self.judge_format.rubric_problem(rubric, self.task)
        if problem is not None:
            raise InputError(f"{where}{field}: {problem}", index=index, field=field)
        return rubric

    def __call__(self, value: RubricLike | None, *, index: int | None = None, field: str = "rubric") -> Rubric:
        """The rubric of one item: ``value``, or the default when ``value`` is None."""
        if value is None:
            if self.default is None:
                where = f"{self.what} {index}: " if index is not None else ""
                raise InputError(
                    f"{where}no rubric: {field} is missing or {{None}} and there is no default; {self.missing_hint}",
                    index=index,
                    field=field,
                    mentions=("None", "rubric", "rubric_column"),  # a missing_hint may name the two settings
                )
            return self.default
        return self.resolve(value, index=index, field=field)
