"""``prom_reward.declared``: one declaration per setting gives its check, its text parsing and its words."""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from prom_reward.declared import check, declared, parse, refuse_unknown, setting
from prom_reward.errors import ConfigError


@dataclass(frozen=True)
class Knobs:
    count: int = setting(2, help="How many.", ge=1)
    share: float = setting(0.5, help="A share.", gt=0, le=1)
    wait_s: float | None = setting(None, help="Seconds.", gt=0, unit="seconds", note="None: no limit")
    how: str = setting("a", help="Which.", choices=("a", "b"))
    width: float | str = setting("auto", help="Width.", choices=("auto",), gt=0)
    name: str = setting("x", help="A   name\n   on two lines.", nonempty=True)
    flag: bool = setting(True, help="On or off.")
    extra: Mapping[str, Any] = setting(factory=dict, help="More.")

    def __post_init__(self) -> None:
        check(self)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"count": 0}, "count: expected an int >= 1, got 0; fix: give an int >= 1"),
        ({"count": True}, "count: expected an int >= 1, got True"),
        ({"count": 2.0}, "count: expected an int >= 1, got 2.0"),
        ({"share": 1.5}, "share: expected a number in (0, 1], got 1.5"),
        ({"share": math.nan}, "share: expected a finite number in (0, 1], got nan"),
        ({"wait_s": 0}, "wait_s: expected seconds > 0 or None (None: no limit), got 0; fix: give seconds > 0 or None"),
        ({"how": "c"}, "how: expected one of a, b, got 'c'"),
        ({"width": "wide"}, "width: expected auto or a number > 0, got 'wide'"),
        ({"width": -1}, "width: expected auto or a number > 0, got -1"),
        ({"name": ""}, "name: expected a non-empty string, got ''"),
        ({"flag": "yes"}, "flag: expected True or False, got 'yes'"),
        ({"extra": ["x"]}, "extra: expected a mapping, got ['x']"),
    ],
)
def test_a_value_outside_its_declaration_is_refused_naming_the_field(options, said):
    with pytest.raises(ConfigError) as e:
        Knobs(**options)
    assert str(e.value).startswith(said) and e.value.setting == next(iter(options))


def test_values_inside_their_declaration_pass():
    knobs = Knobs(count=3, share=1, wait_s=2.5, how="b", width=80, name="n", flag=False, extra={"k": 1})
    assert (knobs.count, knobs.width, knobs.extra) == (3, 80, {"k": 1})


def test_the_declaration_is_read_once_with_help_on_one_line():
    rows = {d.name: d for d in declared(Knobs)}
    assert list(rows) == ["count", "share", "wait_s", "how", "width", "name", "flag", "extra"]
    assert rows["name"].rules.help == "A name on two lines." and rows["extra"].default == {}
    assert rows["wait_s"].kind == float | None and declared(Knobs) is declared(Knobs)


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [("3", int, 3), ("2.0", int, 2), ("off", bool, False), ("none", float | None, None),
     ("a, b", tuple[str, ...], ("a", "b")), ("2", float | str, 2.0), ("min", float | str, "min")],
)  # fmt: skip
def test_text_is_parsed_as_the_declared_type(text, kind, value):
    assert parse("x", text, kind) == value


@pytest.mark.parametrize(("text", "kind"), [("2.5", int), ("many", int), ("perhaps", bool), ("1e999", int)])
def test_text_that_is_not_the_type_is_refused_naming_the_setting(text, kind):
    with pytest.raises(ConfigError, match=r"^x: expected .*, got .*; fix: give ") as e:
        parse("x", text, kind)
    assert e.value.setting == "x"


def test_an_error_is_said_in_the_callers_terms_and_survives_pickling():
    e = ConfigError("expected an int >= 1, got 0", "count")
    assert str(e.said_as("--count", "--count / PROM_X")) == "--count: expected an int >= 1, got 0 [--count / PROM_X]"
    plain = ConfigError("no setting here")
    assert plain.said_as("--count") is plain and str(plain) == "no setting here"
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.setting, back.problem) == (str(e), "count", e.problem)


@dataclass(frozen=True)
class Layout:
    name: str = setting(help="Required: no default.", nonempty=True)
    gpus: tuple[int, ...] = setting((), help="GPU ids.")
    parts: tuple[str, ...] | None = setting(None, help="Some of a, b.", choices=("a", "b"))
    replicas: int | None = setting(None, help="None: auto.", ge=1, none_is="auto")

    def __post_init__(self) -> None:
        check(self)


def test_a_required_setting_tuples_of_ints_some_of_the_choices_and_a_word_for_none():
    assert [d.default for d in declared(Layout)][:2] == [dataclasses.MISSING, ()]
    assert Layout("x", (0, 1), ("b", "a")).parts == ("b", "a")
    with pytest.raises(ConfigError, match=r"^parts: expected some of a, b, None, got \('c',\)"):
        Layout("x", parts=("c",))
    with pytest.raises(ConfigError, match=r"^parts: expected some of a, b, None, got \(\)"):
        Layout("x", parts=())  # some: at least one
    with pytest.raises(ConfigError, match=r"^gpus: expected a comma-separated list of ints, got \('0', 1\)"):
        Layout("x", gpus=("0", 1))
    assert parse("gpus", "4, 5", tuple[int, ...]) == (4, 5)
    with pytest.raises(ConfigError, match=r"^gpus: expected a comma-separated list of ints, got 'a,b'"):
        parse("gpus", "a,b", tuple[int, ...])
    assert parse("replicas", "auto", int | None, "auto") is None and parse("replicas", "2", int | None, "auto") == 2
    with pytest.raises(ConfigError, match=r"^replicas: expected an int or 'auto', got 'x'"):
        parse("replicas", "x", int | None, "auto")


def test_the_null_value_is_said_in_the_callers_terms():
    """A check names the null value as a mention: None in Python, null on the command line or in a file."""
    with pytest.raises(ConfigError) as e:
        Layout("x", replicas=0)
    assert str(e.value) == "replicas: expected an int >= 1 or None, got 0; fix: give an int >= 1 or None"
    said = "--replicas: expected an int >= 1 or null, got 0; fix: give an int >= 1 or null"
    assert e.value.said({"replicas": "--replicas", "None": "null"}) == said


def test_refuse_unknown_names_each_with_its_closest_and_the_setting_holding_them():
    refuse_unknown({"size": 1}, ["size", "seed"])  # every name known: nothing to say
    with pytest.raises(ConfigError) as e:
        refuse_unknown({"sise": 1, "zzz": 2}, ["size", "seed"], "knob", "knobs")
    assert e.value.setting == "knobs"
    assert str(e.value) == (
        "knobs: unknown knob(s) ['sise', 'zzz'] (closest: sise -> size); fix: give knob names only (valid: size, seed)"
    )
