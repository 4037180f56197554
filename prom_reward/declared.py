"""Settings declared once: each dataclass field's type, default, help, choices and bounds in one ``setting(...)``,
read by flags, variables, YAML keys and docs (``declared``), checked by ``check`` (ConfigError), parsed by ``parse``.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Knobs:
    ...     size: int = setting(4, help="How many.", ge=1)
    ...     def __post_init__(self) -> None:
    ...         check(self)
    >>> Knobs(0)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: size: expected an int >= 1, got 0; fix: give an int >= 1
    >>> parse("size", "5", int), parse("x", "false", bool), parse("x", "2", float | str)
    (5, False, 2.0)
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from prom_reward.errors import ConfigError

_KEY = "prom_reward.setting"
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
NULL = ("None",)
"""The ``mentions`` of a message that may name the null value as ``{None}`` (``null`` in a file or a flag)."""


@dataclass(frozen=True)
class Rules:
    """What a setting accepts beyond its type: one of ``choices``, or a number within the bounds; ``nonempty``
    text; ``note`` says why, in the error; ``unit`` names a number (``seconds``); ``none_is``: the word a flag or
    a variable gives for None (``auto``), beside none and null."""

    help: str
    choices: tuple[Any, ...] = ()
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    nonempty: bool = False
    note: str = ""
    unit: str = ""
    none_is: str = ""

    def accepts(self, value: Any, kind: Any) -> bool:
        if not isinstance(value, bool) and value in self.choices:
            return True
        if not _is(value, kind):
            return False
        if _number(value):
            low = (self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
            return low and (self.le is None or value <= self.le)
        if isinstance(value, str):
            return not self.choices and (not self.nonempty or bool(value))
        if isinstance(value, tuple) and self.choices:  # some of the choices
            return bool(value) and set(value) <= set(self.choices)
        return value is None or not self.choices

    def expected(self, kind: Any, null: str = "None") -> str:
        """What the setting takes, in words (``an int >= 1``, ``one of sample, mean``; ``null`` says None)."""
        union = typing.get_origin(kind) in (typing.Union, types.UnionType)
        arms = [a for a in (typing.get_args(kind) if union else (kind,)) if a is not type(None)]
        parts = [str(c) for c in self.choices if c is not None]
        numeric = any(a in (int, float) for a in arms)
        if numeric:
            noun = self.unit or ("an int" if int in arms and float not in arms else "a number")
            if self.le is not None:
                low = f"[{self.ge:g}" if self.ge is not None else f"({self.gt or 0:g}"
                noun += f" in {low}, {self.le:g}]"
            elif self.ge is not None or self.gt is not None:
                noun += f" >= {self.ge:g}" if self.ge is not None else f" > {self.gt:g}"
            parts.append(noun)
        elif not self.choices:
            parts += [_noun(a, self.nonempty) for a in arms]
        if (union and type(None) in typing.get_args(kind)) or None in self.choices:
            parts.append(null)
        some = "some" if any(typing.get_origin(a) is tuple for a in arms) else "one"
        return f"{some} of {', '.join(parts)}" if len(self.choices) > 1 and not numeric else " or ".join(parts)


def setting(default: Any = MISSING, *, factory: Any = MISSING, help: str, **rules: Any) -> Any:
    """A dataclass field declared with its help and ``Rules``: the one place that says what the setting is."""
    meta = {_KEY: Rules(" ".join(help.split()), **rules)}
    return dataclasses.field(default=default, default_factory=factory, metadata=meta)


class Declared(NamedTuple):
    """One declared field: its name, type, default and ``Rules``."""

    name: str
    kind: Any
    default: Any
    rules: Rules


def declared(cls: type) -> tuple[Declared, ...]:
    """The declared settings of dataclass ``cls``, in field order (read once per class; a default ``MISSING``: a
    setting every caller gives)."""
    if cls not in _DECLARED:
        hints = typing.get_type_hints(cls)
        _DECLARED[cls] = tuple(
            Declared(f.name, hints[f.name], f.default if f.default_factory is MISSING else f.default_factory(), meta)
            for f in dataclasses.fields(cls)
            if (meta := f.metadata.get(_KEY)) is not None
        )
    return _DECLARED[cls]


_DECLARED: dict[type, tuple[Declared, ...]] = {}


def check(obj: Any) -> None:
    """``ConfigError`` (its ``setting`` the field) for the first field of ``obj`` outside its declaration."""
    for d in declared(type(obj)):
        value = getattr(obj, d.name)
        if not d.rules.accepts(value, d.kind):
            expected, note = d.rules.expected(d.kind, "{None}"), f" ({d.rules.note})" if d.rules.note else ""
            if isinstance(value, float) and not math.isfinite(value):  # nan, inf: say what is wrong with it
                expected = expected.replace("a number", "a finite number", 1)
            raise ConfigError(f"expected {expected}{note}, got {value!r}; fix: give {expected}", d.name, NULL)


def parse(name: str, value: Any, kind: Any, none_is: str = "") -> Any:
    """``value`` (text from a flag or the environment, or a YAML value) as ``kind``, setting ``name``'s type
    (``none_is``: one more word for None)."""
    optional = type(None) in typing.get_args(kind)
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    base = args[0] if optional and len(args) == 1 else kind
    if optional and (
        value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null", none_is))
    ):
        return None
    origin = typing.get_origin(base)
    try:
        if kind is Any or (isinstance(base, type) and dataclasses.is_dataclass(base)):
            return value
        if origin is tuple:  # tuple[str, ...] or tuple[int, ...]
            items = value.split(",") if isinstance(value, str) else list(value)
            try:
                return tuple(parse(name, str(v).strip(), typing.get_args(base)[0]) for v in items if str(v).strip())
            except ConfigError:
                raise TypeError from None
        if origin in (dict, Mapping):
            if not isinstance(value, Mapping):
                raise TypeError
            return _plain(value)
        if origin in (typing.Union, types.UnionType) and isinstance(value, str):  # float | str: a number if one
            try:
                number = float(value)
            except ValueError:
                return value.strip()
            return int(number) if int in typing.get_args(base) and number.is_integer() else number
        if base is bool and not isinstance(value, bool):
            text = str(value).strip().lower()
            if text not in _TRUE + _FALSE:
                raise ValueError(value)
            return text in _TRUE
        if isinstance(value, bool) and base in (int, float):
            raise TypeError
        if base is int:
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if base is float:
            return float(value)
        if base is str and not isinstance(value, str):
            raise TypeError
    except (TypeError, ValueError, OverflowError):  # OverflowError: int("1e999"), an infinite count
        expected = Rules("").expected(kind, repr(none_is) if none_is else "{None}")
        raise ConfigError(f"expected {expected}, got {value!r}; fix: give {expected}", name, NULL) from None
    return value


def refuse_unknown(given: Iterable[Any], valid: Sequence[str], what: str = "setting", where: str = "") -> None:
    """``ConfigError`` for the names of ``given`` not in ``valid`` (``what`` they are; ``where``: the setting that
    holds them, the error's), each with its closest valid name."""
    unknown = sorted(set(map(str, given)) - set(valid))
    if not unknown:
        return
    closest = [f"{name} -> {m[0]}" for name in unknown if (m := difflib.get_close_matches(name, valid, n=1))]
    hint = f" (closest: {', '.join(closest)})" if closest else ""
    raise ConfigError(
        f"unknown {what}(s) {unknown}{hint}; fix: give {what} names only (valid: {', '.join(valid)})", where
    )


def read_text(path: str | Path, fix: str, setting: str = "", what: str = "") -> str:
    """The UTF-8 text of the file at ``path`` (a byte order mark dropped), else ``ConfigError`` about ``setting``
    (``what``: the kind of file, ``rubric file``; ``fix``: the file to give)."""
    name = f"{what} {str(path)!r}".strip()
    try:
        return Path(path).read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise ConfigError(f"cannot read {name} ({e.strerror or e}); fix: {fix}", setting) from e
    except UnicodeDecodeError as e:
        bad = f"byte {e.start}: {e.object[e.start : e.start + 1]!r}"
        raise ConfigError(f"{name} is not UTF-8 text ({bad}); fix: save it as UTF-8", setting) from None


def add_settings(
    group: Any,
    cls: type,
    names: Sequence[str] = (),
    *,
    prefix: str = "",
    defaults: Any = None,
    note: str = "",
    flags: Mapping[str, str] | None = None,
) -> None:
    """An argparse flag for each setting ``names`` of ``cls`` (default: every one), ``--<prefix><name>``
    (``log_dir`` -> ``--log-dir``, or as ``flags`` names it; a setting off by default: a switch): its declared help,
    choices and default (``defaults``' where given; ``note`` after a choice's), read back by ``given_settings``."""
    for d in _named(cls, names):
        default = d.default if defaults is None else getattr(defaults, d.name)
        flag = (flags or {}).get(d.name) or "--" + (prefix + d.name).replace("_", "-")
        help = d.rules.help.replace("%", "%%")
        if d.kind is bool and default is False:
            group.add_argument(flag, dest=prefix + d.name, action="store_true", default=None, help=help)
            continue
        kinds = (d.kind, *typing.get_args(d.kind))
        listed = any(typing.get_origin(a) is tuple for a in kinds)  # some of the choices, or a number beside them:
        open_choices = listed or any(a in (int, float) for a in kinds)  # argparse cannot check them
        shown = "" if default in (None, ()) else f"default {','.join(default) if listed else default}"
        shown += f"; {note}" if note and d.rules.choices else ""
        group.add_argument(
            flag,
            dest=prefix + d.name,
            choices=None if open_choices else tuple(c for c in d.rules.choices if c is not None) or None,
            metavar=d.rules.unit.upper() or None,
            help=help + (f" ({shown})" if shown else "").replace("%", "%%"),
        )


def given_settings(args: Any, cls: type, names: Sequence[str] = (), prefix: str = "") -> dict[str, Any]:
    """The settings ``names`` of ``cls`` (default: every one) given as ``add_settings``' flags, each read as its
    declared type (``parse``; an error names the flag's dest)."""
    given = ((d, getattr(args, prefix + d.name)) for d in _named(cls, names))
    return {d.name: parse(prefix + d.name, v, d.kind, d.rules.none_is) for d, v in given if v is not None}


def _named(cls: type, names: Sequence[str]) -> list[Declared]:
    found = {d.name: d for d in declared(cls)}
    return [found[name] for name in names or found]


def _is(value: Any, kind: Any) -> bool:
    if kind is Any:
        return True
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return any(_is(value, a) for a in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is float:
        return _number(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    origin = typing.get_origin(kind)
    if origin is tuple:
        return isinstance(value, tuple) and all(_is(v, typing.get_args(kind)[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping)
    return isinstance(value, origin or kind)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _plain(value: Any) -> Any:
    """Nested mappings and sequences (OmegaConf's included) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


def _noun(kind: Any, nonempty: bool) -> str:
    nouns = {bool: "True or False", str: "a non-empty string" if nonempty else "a string", dict: "a mapping"}
    nouns[Mapping] = nouns[dict]
    plain = typing.get_origin(kind) or kind
    if plain is tuple:
        return "a comma-separated list of " + {int: "ints"}.get(typing.get_args(kind)[0], "strings")
    name = str(getattr(plain, "__name__", plain))
    return nouns.get(plain) or f"{'an' if name[0] in 'AEIOUaeiou' else 'a'} {name}"
