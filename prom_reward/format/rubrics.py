"""Score rubrics: the five built-ins, conversion between dicts, files and formatted text (``Rubric.parse``
inverts ``format()``), and ``RubricResolver``, the one way every entry point turns rubric values into ``Rubric``
objects (each distinct value once, a default where none, the format's fit check, ``InputError`` naming the item)."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import yaml

from prom_reward.declared import read_text, refuse_unknown
from prom_reward.errors import ConfigError, InputError, PromRewardError, UnknownNameError
from prom_reward.format.parsing import Task
from prom_reward.format.templates import SCORE_RUBRIC_TEMPLATE, TEMPLATES, unicode_problem
from prom_reward.registry import Registry

_SCORE_KEYS = tuple(f"score{k}_description" for k in range(1, 6))
_MARKERS = tuple(f"\nScore {k}: " for k in range(1, 6))
_SUFFIXES = (".json", ".yaml", ".yml")
_LAYOUTS = (
    "'criteria' plus 'score1_description'..'score5_description' (or a 'descriptions' list of 2 to 5, "
    "lowest score first), or 'criteria' alone for a pairwise-only rubric"
)


@dataclass(frozen=True)
class Rubric:
    """A score rubric; validated on construction (raises ConfigError)."""

    criteria: str
    """The question the judge grades against, without the surrounding brackets."""
    descriptions: tuple[str, ...] = ()
    """What each score means, lowest first: five (scores 1..5), 2 to 4 for a shorter scale, or none (pairwise)."""

    def __post_init__(self) -> None:
        descs = self.descriptions
        if not isinstance(descs, (list, tuple)):
            raise ConfigError(
                f"rubric descriptions must be a list or tuple of 2 to 5 str, got "
                f"{type(descs).__name__}; pass (score1, ..., score5) or () for pairwise only"
            )
        object.__setattr__(self, "descriptions", tuple(descs))
        if len(descs) == 1 or len(descs) > 5:
            raise ConfigError(
                f"a rubric needs 2 to 5 score descriptions, lowest score first (5 for a 1-5 scale), or none "
                f"for a pairwise-only rubric; got {len(descs)}: give one per score of the judge's scale or none"
            )
        empty_fix = "pass the question the judge grades against, e.g. 'Is the response helpful?'"
        parts = [("criteria", self.criteria, empty_fix)]
        parts += [(f"score {k} description", d, f"describe what a {k} means") for k, d in enumerate(descs, 1)]
        for where, text, fix in parts:
            if not isinstance(text, str):
                raise ConfigError(f"rubric {where} must be a str, got {type(text).__name__}")
            if not text.strip():
                raise ConfigError(f"rubric {where} is empty ({text!r}); {fix}")
            problem = unicode_problem(text)
            if problem is not None:
                raise ConfigError(
                    f"rubric {where} {problem} and cannot be sent to the judge; fix: decode the text with "
                    "errors='replace'"
                )
            for marker in _MARKERS:
                if marker in text:
                    raise ConfigError(
                        f"rubric {where} contains {marker!r}, which would make the formatted "
                        "rubric ambiguous; reword it"
                    )

    @property
    def has_scores(self) -> bool:
        """True when the rubric has five score descriptions (what Prometheus' 1-5 grading and ``format()`` need)."""
        return len(self.descriptions) == 5

    def format(self) -> str:
        """The full formatted rubric (``SCORE_RUBRIC_TEMPLATE`` filled), as absolute prompts use it."""
        if not self.has_scores:
            raise ConfigError(
                f"rubric {self.criteria[:60]!r} has {len(self.descriptions) or 'no'} score descriptions, so it "
                "has no Prometheus form (five); use format_criteria() for pairwise prompts, or give five"
            )
        return SCORE_RUBRIC_TEMPLATE.format(criteria=self.criteria, **self._score_fields())

    def format_criteria(self) -> str:
        """The bracketed criteria line alone, ``[criteria]``, as pairwise prompts use it."""
        return f"[{self.criteria}]"

    def to_dict(self) -> dict[str, Any]:
        """``{"criteria": ..., "score1_description": ..., ...}``; a ``descriptions`` list when there are 2 to 4.

        >>> Rubric("Right?", ("No.", "Yes.")).to_dict()
        {'criteria': 'Right?', 'descriptions': ['No.', 'Yes.']}
        """
        if self.descriptions and not self.has_scores:
            return {"criteria": self.criteria, "descriptions": list(self.descriptions)}
        return {"criteria": self.criteria, **self._score_fields()}

    def _score_fields(self) -> dict[str, str]:
        return dict(zip(_SCORE_KEYS, self.descriptions, strict=True)) if self.has_scores else {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rubric:
        """A rubric from ``criteria`` plus ``score1_description``..``score5_description`` or a ``descriptions`` list,
        or ``criteria`` alone; a key whose value is None is absent (a struct column's null).

        >>> Rubric.from_dict({"criteria": "Kind?", "descriptions": None, "score1_description": None}).has_scores
        False
        """
        if not isinstance(d, Mapping):
            raise ConfigError(f"a rubric dict must be a mapping, got {type(d).__name__}; expected {_LAYOUTS}")
        d = {k: v for k, v in d.items() if v is not None}
        refuse_unknown(d, ("criteria", "descriptions", *_SCORE_KEYS), "rubric key")
        if "criteria" not in d:
            raise ConfigError(f"rubric dict has no 'criteria' key (got {sorted(map(str, d))}); expected {_LAYOUTS}")
        present = [k for k in _SCORE_KEYS if k in d]
        if present and "descriptions" in d:
            raise ConfigError(f"rubric dict has both 'descriptions' and score keys {present}; give one layout only")
        if present and len(present) != 5:
            missing = [k for k in _SCORE_KEYS if k not in d]
            raise ConfigError(
                f"rubric dict has {present} but lacks {missing}; fix: give all five score "
                "descriptions, a 'descriptions' list for a shorter scale, or none for a pairwise-only rubric"
            )
        descriptions = tuple(d[k] for k in _SCORE_KEYS) if present else d.get("descriptions", ())
        return cls(d["criteria"], descriptions)

    @classmethod
    def from_biggen(cls, x: str | Mapping[str, Any]) -> Rubric:
        """A rubric from a BiGGen ``score_rubric`` (a Python-literal dict string, the dict, or a record holding one);
        ``ast.literal_eval``, never eval."""
        if isinstance(x, str):
            try:
                x = ast.literal_eval(x)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
                raise ConfigError(f"BiGGen score_rubric is not a Python-literal dict ({e}); got {str(x)[:60]!r}") from e
        if isinstance(x, Mapping) and "score_rubric" in x:
            return cls.from_biggen(x["score_rubric"])
        return cls.from_dict(x)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, text: str) -> Rubric:
        """The inverse of ``format()`` (and of ``format_criteria()`` for the bare ``[criteria]`` form).

        >>> Rubric.parse("[Is [x] kind?]").criteria
        'Is [x] kind?'
        """
        if not isinstance(text, str):
            raise ConfigError(f"formatted rubric must be a str, got {type(text).__name__}")
        if not text.startswith("["):
            raise ConfigError(f"formatted rubric text starts with '[criteria]', got {text[:60]!r}")
        where = [text.find(m) for m in _MARKERS]
        if where[0] < 0:
            if any(w >= 0 for w in where) or not text.endswith("]") or len(text) < 2:
                raise ConfigError(
                    f"expected '[criteria]' alone or followed by 'Score 1: ...' to 'Score 5: ...' "
                    f"lines, got {text[:80]!r}"
                )
            return cls(text[1:-1])
        if [text.count(m) for m in _MARKERS] != [1] * 5 or where != sorted(where):
            raise ConfigError(
                "formatted rubric must have exactly one line for each of 'Score 1: ' .. 'Score 5: ', "
                f"in order, after the '[criteria]' line; got {text[:80]!r}..."
            )
        if text[where[0] - 1] != "]":
            raise ConfigError(f"the criteria line must end with ']' before 'Score 1: '; got {text[: where[0]]!r}")
        ends = where[1:] + [len(text)]
        descriptions = tuple(text[w + len(m) : e] for w, m, e in zip(where, _MARKERS, ends, strict=True))
        rubric = cls(text[1 : where[0] - 1], descriptions)
        if rubric.format() != text:
            raise ConfigError(f"rubric text does not re-format to itself: {text[:80]!r}...")
        return rubric

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Rubric:
        """A rubric from a ``.json``/``.yaml``/``.yml`` file: a rubric dict, formatted text or a BiGGen string."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix not in _SUFFIXES:
            raise ConfigError(f"rubric file {str(p)!r} must end in .json, .yaml or .yml, got {suffix or 'no suffix'!r}")
        text = read_text(p, "give the path of a readable rubric file", what="rubric file")
        try:
            data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
        except (ValueError, RecursionError, yaml.YAMLError) as e:
            raise ConfigError(f"rubric file {str(p)!r} is not valid {suffix[1:].upper()}: {e}") from e
        try:
            if isinstance(data, str):
                return cls.parse(data) if data.startswith("[") else cls.from_biggen(data)
            return cls.from_biggen(data)
        except ConfigError as e:
            raise ConfigError(f"rubric file {str(p)!r}: {e}") from e


NO_RUBRIC = Rubric("none given: the judge format's prompt has no rubric slot")
"""The rubric of an item that names none in a format whose prompt shows none (``JudgeFormat.uses_rubric``)."""

RUBRICS: Registry[Rubric] = Registry("rubric")
"""The five built-in rubrics from ``assets/templates.json`` (``HELPFULNESS_RUBRIC``: ``helpfulness``)."""
for _key, _text in TEMPLATES.items():
    if _key.endswith("_RUBRIC"):
        RUBRICS.register(_key.removesuffix("_RUBRIC"), Rubric.parse(_text))

RubricLike = Rubric | str | Mapping[str, Any] | os.PathLike[str]
"""What names a rubric: a ``Rubric``, a built-in name, formatted text, a rubric dict or a .json/.yaml path."""
RubricsLike = RubricLike | Sequence[RubricLike]
"""The rubric argument of a batch: one rubric for every item, or a sequence with one per item."""


def one_for_all(value: RubricsLike) -> TypeGuard[RubricLike]:
    """Whether a batch's rubric argument is one rubric for every item (else a sequence with one per item)."""
    return not isinstance(value, Sequence) or isinstance(value, (str, bytes, Rubric))


def get_rubric(x: RubricLike) -> Rubric:
    """A ``Rubric`` from a ``Rubric``, a built-in name, a rubric dict, a .json/.yaml/.yml path or formatted text.

    >>> get_rubric("Reasoning") == RUBRICS.get("reasoning")
    True
    """
    if isinstance(x, Rubric):
        return x
    if isinstance(x, Mapping):
        return Rubric.from_biggen(x)
    if isinstance(x, os.PathLike):
        return Rubric.from_file(x)
    if not isinstance(x, str):
        raise ConfigError(
            f"cannot make a rubric from {type(x).__name__}; pass a Rubric, a built-in name "
            f"({', '.join(RUBRICS.names())}), a dict, a .json/.yaml path or '[criteria]...' text"
        )
    if x.startswith("["):
        return Rubric.parse(x)
    if x in RUBRICS:
        return RUBRICS.get(x)
    if Path(x).suffix.lower() in _SUFFIXES:
        return Rubric.from_file(x)
    err = UnknownNameError("rubric", x, RUBRICS.names())
    err.args = (
        f"unknown rubric {x!r}; fix: give a built-in name ({', '.join(err.valid)}), a .json/.yaml/.yml rubric file, "
        "formatted '[criteria]\\nScore 1: ...' text, or (in Python) a Rubric or a rubric dict",
    )
    raise err


class _FitCheck(Protocol):  # a JudgeFormat's rubric check (judge_format.py imports this module)
    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None: ...


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
        judge_format: _FitCheck | None = None,
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
        try:  # equal values, equal keys: the value itself, or its canonical JSON
            key = value if isinstance(value, (str, Rubric)) else json.dumps(value, sort_keys=True, default=str)
        except (TypeError, ValueError):
            key = repr(value)
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
