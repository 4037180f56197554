"""Rubrics: exact format/parse round trips, dict/file/BiGGen layouts, validation, built-in names."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from prom_reward.errors import ConfigError, PromRewardError, UnknownNameError
from prom_reward.format import templates as prompts
from prom_reward.format.rubrics import RUBRICS, Rubric, get_rubric

DESCS = ("Rude.", "Curt.", "Neutral.", "Warm.", "Very kind.")
KIND = Rubric("Is it kind?", DESCS)
BUILTINS = {
    "helpfulness": prompts.HELPFULNESS_RUBRIC,
    "harmlessness": prompts.HARMLESSNESS_RUBRIC,
    "honesty": prompts.HONESTY_RUBRIC,
    "factual_validity": prompts.FACTUAL_VALIDITY_RUBRIC,
    "reasoning": prompts.REASONING_RUBRIC,
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_round_trip(name):
    rubric = RUBRICS.get(name)
    assert rubric.has_scores and rubric.format() == BUILTINS[name]
    assert Rubric.parse(BUILTINS[name]) == rubric == get_rubric(name) == get_rubric(name.upper())
    assert rubric.format_criteria() == BUILTINS[name].split("\n")[0]


def test_builtin_names():
    assert RUBRICS.names() == sorted(BUILTINS)


def test_all_biggen_rubrics_round_trip(data_dir):
    data = json.loads((data_dir / "biggen_rubrics.json").read_text(encoding="utf-8"))
    failed, checked = [], 0
    for rec_id, rec in data.items():
        rubric = Rubric.from_biggen(rec["score_rubric"])
        layout = rec["score_rubric"] if isinstance(rec["score_rubric"], dict) else None
        same = Rubric.parse(rubric.format()) == rubric and Rubric.from_biggen(repr(rubric.to_dict())) == rubric
        if layout is not None:
            same = same and rubric.to_dict() == layout and Rubric.from_biggen(repr(layout)) == rubric
        if not same:
            failed.append(rec_id)
        checked += 1
    assert not failed
    assert checked == len(data) == 765


def test_format_layout_and_criteria():
    assert KIND.format() == (
        "[Is it kind?]\nScore 1: Rude.\nScore 2: Curt.\nScore 3: Neutral.\nScore 4: Warm.\nScore 5: Very kind."
    )
    assert KIND.format() == prompts.SCORE_RUBRIC_TEMPLATE.format(
        criteria="Is it kind?", **{f"score{k}_description": d for k, d in enumerate(DESCS, 1)}
    )
    assert KIND.format_criteria() == "[Is it kind?]"
    assert Rubric("Is it kind?").format_criteria() == "[Is it kind?]"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_shorter_scales_keep_their_descriptions(n):
    """Judges on 2- to 4-point scales (Flow-Judge binary and 3-point) take 2 to 4 descriptions, lowest first;
    they have no Prometheus form, and round-trip through the ``descriptions`` layout."""
    r = Rubric("Is it kind?", DESCS[:n])
    assert r.descriptions == DESCS[:n] and not r.has_scores
    assert r.to_dict() == {"criteria": "Is it kind?", "descriptions": list(DESCS[:n])}
    assert Rubric.from_dict(r.to_dict()) == r == Rubric.from_biggen(repr(r.to_dict())) == get_rubric(r.to_dict())
    with pytest.raises(ConfigError, match=f"has {n} score descriptions, so it has no Prometheus form"):
        r.format()


def test_pairwise_only_rubric():
    r = Rubric("Is it kind?")
    assert not r.has_scores and r.descriptions == ()
    with pytest.raises(ConfigError, match="format_criteria"):
        r.format()
    assert Rubric.parse("[Is it kind?]") == r
    assert r.to_dict() == {"criteria": "Is it kind?"} and Rubric.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    "rubric",
    [
        Rubric("Uses [brackets] and ends with ]", DESCS),
        Rubric("[Already bracketed]", DESCS),
        Rubric(" padded criteria ", (" lead", "trail ", "Score 1: inside", "**Score 4:** bold", "multi\nline")),
        Rubric("a]\nb", DESCS),
        Rubric("[x]"),
    ],
)
def test_parse_inverts_format_for_tricky_text(rubric):
    text = rubric.format() if rubric.has_scores else rubric.format_criteria()
    assert Rubric.parse(text) == rubric


printable = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(str.strip)


@settings(max_examples=200, deadline=None)
@given(printable, st.lists(printable, min_size=5, max_size=5))
def test_parse_inverts_format_property(criteria, descs):
    try:
        rubric = Rubric(criteria, tuple(descs))
    except ConfigError:
        return  # a part contained a '\nScore k: ' marker
    assert Rubric.parse(rubric.format()) == rubric
    assert Rubric.parse(rubric.format_criteria()) == Rubric(criteria)


def test_descriptions_list_becomes_tuple_and_rubric_is_frozen():
    r = Rubric("Is it kind?", list(DESCS))  # type: ignore[arg-type]
    assert r == KIND and isinstance(r.descriptions, tuple) and hash(r) == hash(KIND)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.criteria = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "args, expected",
    [
        (("Is it kind?", DESCS[:1]), ["2 to 5 score descriptions", "got 1"]),
        (("Is it kind?", (*DESCS, "Saintly.")), ["2 to 5 score descriptions", "got 6"]),
        (("", DESCS), ["criteria is empty"]),
        (("   ", ()), ["criteria is empty"]),
        ((None, DESCS), ["criteria must be a str", "NoneType"]),
        ((3, ()), ["criteria must be a str", "int"]),
        (("Is it kind?", ("a", "b", 3, "d", "e")), ["score 3", "must be a str", "int"]),
        (("Is it kind?", ("a", "b", "", "d", "e")), ["score 3", "is empty"]),
        (("Is it kind?", "abcde"), ["list or tuple", "str"]),
        (("Is it kind?", ("a", "b\nScore 3: c", "c", "d", "e")), ["score 2 description", "ambiguous"]),
        (("Is it \ud800kind?", ()), ["criteria holds a lone surrogate", "character 6", "fix:"]),
        (("Is it kind?", ("a", "b", "c\udfff", "d", "e")), ["score 3 description holds a lone surrogate"]),
    ],
)
def test_invalid_rubrics(args, expected):
    with pytest.raises(ConfigError) as err:
        Rubric(*args)
    for text in expected:
        assert text in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "Is it kind?",
        "[Is it kind?",
        "[Is it kind?]\nScore 1: a",
        "[Is it kind?]\nScore 1: a\nScore 2: b",
        "[Is it kind?]\nScore 1: a\nScore 3: c\nScore 2: b\nScore 4: d\nScore 5: e",
        "[Is it kind?\nScore 1: a\nScore 2: b\nScore 3: c\nScore 4: d\nScore 5: e",
        "[]",
        "[Is it kind?]\nScore 1: a\nScore 2: b\nScore 3: c\nScore 4: \nScore 5: e",
        "",
    ],
)
def test_parse_rejects_malformed_text(text):
    with pytest.raises(ConfigError):
        Rubric.parse(text)


def test_from_dict_layouts():
    flat = {"criteria": "Is it kind?", **{f"score{k}_description": d for k, d in enumerate(DESCS, 1)}}
    assert Rubric.from_dict(flat) == KIND and KIND.to_dict() == flat
    assert Rubric.from_dict({"criteria": "Is it kind?", "descriptions": list(DESCS)}) == KIND
    assert Rubric.from_dict({"criteria": "Is it kind?"}) == Rubric("Is it kind?")


def test_rubric_dicts_of_a_struct_column_read_a_null_key_as_absent(tmp_path: Path):
    """A Parquet (or ``datasets``) struct column gives every row every key of every layout, null where a row lacks
    it: each row's rubric is still its own layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        KIND.to_dict(),
        {"criteria": "Is it kind?", "descriptions": list(DESCS)},
        {"criteria": "Is it short?"},
    ]
    pq.write_table(pa.table({"rubric": rows}), tmp_path / "r.parquet")
    read = pq.read_table(tmp_path / "r.parquet").column("rubric").to_pylist()
    assert read[1]["score1_description"] is None and read[0]["descriptions"] is None  # nulls for the other layout
    assert [Rubric.from_dict(d) for d in read] == [KIND, KIND, Rubric("Is it short?")]


@pytest.mark.parametrize(
    "d, expected",
    [
        ({"criteria": "c", "score1_description": "a"}, ["lacks", "score2_description"]),
        ({"criteria": "c", "scores": [1]}, ["unknown rubric key", "scores", "score1_description"]),
        ({"score1_description": "a"}, ["no 'criteria'"]),
        ({"criteria": "c", "descriptions": list(DESCS), "score1_description": "a"}, ["both"]),
        ({"criteria": "c", "descriptions": ["a"]}, ["got 1"]),
        (["criteria"], ["mapping", "list"]),
    ],
)
def test_from_dict_errors(d, expected):
    with pytest.raises(ConfigError) as err:
        Rubric.from_dict(d)
    for text in expected:
        assert text in str(err.value)


def test_from_biggen_layouts():
    literal = repr(KIND.to_dict())
    assert Rubric.from_biggen(literal) == KIND == Rubric.from_biggen(KIND.to_dict())
    assert Rubric.from_biggen({"id": "x", "score_rubric": literal}) == KIND
    with pytest.raises(ConfigError, match="Python-literal"):
        Rubric.from_biggen("__import__('os').system('true')")
    with pytest.raises(ConfigError):
        Rubric.from_biggen("[1, 2]")


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_from_file(tmp_path: Path, suffix):
    dump = json.dumps if suffix == ".json" else yaml.safe_dump
    for i, content in enumerate(
        [KIND.to_dict(), {"criteria": "Is it kind?", "descriptions": list(DESCS)}, KIND.format(), repr(KIND.to_dict())]
    ):
        path = tmp_path / f"r{i}{suffix}"
        path.write_text(dump(content), encoding="utf-8")
        assert Rubric.from_file(path) == KIND == get_rubric(path) == get_rubric(str(path))


def test_from_file_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        Rubric.from_file(tmp_path / "missing.json")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")  # was a UnicodeDecodeError traceback
    with pytest.raises(ConfigError, match="rubric file .*binary.yaml.* is not UTF-8 text .*fix: save it as UTF-8"):
        Rubric.from_file(binary)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        Rubric.from_file(bad)
    txt = tmp_path / "rubric.txt"
    txt.write_text(KIND.format(), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\.json, \.yaml or \.yml"):
        Rubric.from_file(txt)
    partial = tmp_path / "partial.yaml"
    partial.write_text("criteria: c\nscore1_description: a\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="partial.yaml.*lacks"):
        Rubric.from_file(partial)


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("latin1.json", b'{"criteria": "caf\xe9"}', "is not UTF-8 text"),
        ("latin1.yaml", b"criteria: caf\xe9\n", "is not UTF-8 text"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "is not valid JSON"),
        ("surrogate.json", b'{"criteria": "a\\ud800"}', "criteria holds a lone surrogate"),
        ("surrogate.yaml", b'criteria: "a\\ud800"\n', "criteria holds a lone surrogate"),
    ],
)
def test_a_rubric_file_with_bad_bytes_is_a_config_error_naming_it(tmp_path: Path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        get_rubric(str(path))
    assert name in str(err.value) and expected in str(err.value)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_rubric_file_may_start_with_a_byte_order_mark(tmp_path: Path, suffix):
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(KIND.to_dict()).encode())
    assert get_rubric(str(path)) == KIND


def test_get_rubric_resolves_every_form():
    assert get_rubric(KIND) is KIND
    assert get_rubric(KIND.to_dict()) == KIND
    assert get_rubric(KIND.format()) == KIND
    assert get_rubric("[Is it kind?]") == Rubric("Is it kind?")
    assert get_rubric("helpfulness") is RUBRICS.get("helpfulness")
    with pytest.raises(ConfigError, match="cannot make a rubric from int"):
        get_rubric(5)  # type: ignore[arg-type]


def test_unknown_name_lists_valid_names_and_other_forms():
    with pytest.raises(UnknownNameError) as err:
        get_rubric("helpfulnes")
    message = str(err.value)
    assert all(name in message for name in BUILTINS)
    assert "file" in message and "dict" in message
    assert err.value.valid == sorted(BUILTINS) and isinstance(err.value, (KeyError, PromRewardError))
