"""The load-time checks of a YAML judge format file (``prom_reward.format.formats.from_yaml``): a table of bad
files, each refused naming the file, the key and the fix; YAML syntax errors with their line; a missing file; and
the example of docs/formats.md, which loads, renders and reads as the docs say."""

from __future__ import annotations

from pathlib import Path

import pytest

from prom_reward import ConfigError
from prom_reward.errors import UnknownNameError
from prom_reward.format.judge_format import get_judge_format
from prom_reward.format.rubrics import Rubric
from tests.format.yaml_specs import DROP, A, R, dump, set_key, tiny_spec

ERRORS = [
    ("name", DROP, "name", "missing; fix: add name (a string)"),
    ("name", 3, "name", "expected a string, got int 3; fix: write name as a string"),
    ("name", "my judge", "name", "'my judge' is not a plain name; fix: use letters, digits"),
    ("names", "x", "names", "unknown key; fix: use one of name, scale,"),
    ("tasks.grading", {"user": "{response}"}, "tasks.grading", "unknown task; fix: use one of absolute, relative"),
    ("tasks", {}, "tasks", "no task; fix: add tasks.absolute"),
    ("scale", [1, "2", 3], "scale", "expected a list of ints, got [1, '2', 3]"),
    ("scale", [1.0, 2.0], "scale", "expected a list of ints"),
    ("scale", [True, False], "scale", "expected a list of ints"),
    ("scale", [3, 2, 1], "scale", "expected 2 or more increasing ints, got [3, 2, 1]; fix: e.g. [1, 2, 3, 4, 5]"),
    ("scale", DROP, "scale", "expected 2 or more increasing ints, got []"),
    ("force_prefix", "", "force_prefix", "empty; fix: give the text before the verdict token"),
    ("markers", ["RESULT"], "markers", "'RESULT' cannot be neutralised; fix: give '###Name', '[WORD]'"),
    ("rubric_item", "Score {score}", "rubric_item", "no {description} field"),
    (A + "user", DROP, A + "user", "missing; fix: add tasks.absolute.user (a string)"),
    (A + "user", "{instruction} {respons}", A + "user", "unknown field {respons}; valid fields: {instruction}, "),
    (A + "system", "Be {fair}.", A + "system", "unknown field {fair}; valid fields: {instruction}, {response}, "),
    (A + "user", "{response} {", A + "user", "write literal braces as {{ and }}"),
    (A + "user", "{instruction}", A + "user", "no {response} field: the judge would not see it"),
    (R + "user", "{response_a} {response}", R + "user", "unknown field {response}; valid fields: {instruction}, "),
    (R + "user", "{response_a} vs ...", R + "user", "no {response_b} field"),
    (A + "reference_missing", DROP, A + "user", "uses {reference}, but nothing says how a missing reference"),
    (A + "user_no_reference", "{response} {reference}", A + "user_no_reference", "uses {reference}, but it renders"),
    (A + "verdict.pattern", r"Score: (?P<verdict>\d+", A + "verdict.pattern", "not a regular expression (missing ),"),
    (A + "verdict.pattern", r"Score: (\d)", A + "verdict.pattern", "has no named group 'verdict'; fix: wrap"),
    (A + "verdict", "Score: N", A + "verdict", "expected a mapping, got str"),
    (A + "verdict", DROP, A + "verdict", "missing; fix: add tasks.absolute.verdict (a mapping)"),
    (A + "verdict.match", "middle", A + "verdict.match", "expected one of last, first, only, got 'middle'"),
    (A + "verdict.at_end", "yes", A + "verdict.at_end", "expected true or false, got str 'yes'"),
    (A + "verdict.map", {"x": 7}, A + "verdict.map.x", "maps to 7, not a verdict ((1, 2, 3))"),
    (R + "verdict.map", {"a": "C"}, R + "verdict.map.a", "maps to 'C', not a verdict (('A', 'B'))"),
    (A + "verdict.map", {"x": 2.0}, A + "verdict.map.x", "maps to 2.0, not a verdict ((1, 2, 3))"),
    (A + "verdict.map", {1: 1, "1": 2}, A + "verdict.map", "key '1' is given twice (as text and as a number)"),
    ("markers", ["<q>", "<\ud800>"], "markers[1]", "holds a lone surrogate (an escape such as \\ud800 alone)"),
    (A + "system", "Grade \ud83d\ude00.", A + "system", "escape one beyond U+FFFF as \\U0001F600"),
    (R + "verdict_tokens", ["a"], R + "verdict_tokens", "expected 2 non-empty strings (A's then B's), got ['a']"),
    (A + "verdict_tokens", ["1", "2"], A + "verdict_tokens", "expected 3 non-empty strings (the scale's length)"),
    (A + "verdict_tokens", ["x", "y", "z"], A + "verdict_tokens", "are not the scale's numbers ['1', '2', '3']"),
]


@pytest.mark.parametrize("key, value, named, words", ERRORS)
def test_a_bad_file_is_refused_at_load_naming_the_file_the_key_and_the_fix(tmp_path, key, value, named, words):
    path = dump(tmp_path / "bad.yaml", set_key(tiny_spec(), key, value))
    with pytest.raises(ConfigError) as e:
        get_judge_format(path)
    message = str(e.value)
    assert message.startswith(f"judge format file {path!r}, key {named!r}: ") and "; fix: " in message
    assert words in message


@pytest.mark.parametrize(
    "text, words",
    [
        ("name: x\ntasks:\n  absolute: {user: '{response}'\n", "is not valid YAML at line 4, column 1: "),
        ("name: x\n  scale: [1, 2]\n", "is not valid YAML at line 2, column 8: "),
        ("- name: x\n", "key '(top)': expected a mapping, got list"),
        ("", "key '(top)': expected a mapping, got NoneType"),
        ("name: x\ntasks: {}\nname: y\n", "is not valid YAML at line 3, column 1: key 'name' is written twice"),
        ("[" * 5000 + "]" * 5000, "nests its values too deep to read"),  # raised RecursionError
        ("name: x\ntasks:\n  absolute: {user: a, user: b}\n", "line 3, column 23: key 'user' is written twice"),
    ],
)
def test_a_file_that_is_not_a_yaml_mapping_is_refused_with_its_line(tmp_path, text, words):
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="fix: ") as e:
        get_judge_format(str(path))
    assert str(e.value).startswith(f"judge format file {str(path)!r}") and words in str(e.value)


def test_a_missing_file_says_so_and_a_name_keeps_the_registry_error(tmp_path):
    with pytest.raises(ConfigError, match=r"judge format file '.*nope.yaml' does not exist; fix: give the path"):
        get_judge_format(str(tmp_path / "nope.yaml"))
    with pytest.raises(UnknownNameError, match="unknown judge format 'my_judge'; valid names: "):
        get_judge_format("my_judge")
    assert get_judge_format(dump(tmp_path / "t.YAML", tiny_spec())).name.startswith("tiny@")  # any case of suffix
    assert get_judge_format(Path(dump(tmp_path / "t.yml", tiny_spec()))).name.startswith("tiny@")  # a Path too
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.yaml' is not UTF-8 text .*; fix: save it as UTF-8"):
        get_judge_format(str(latin))


# -- the example of docs/formats.md -------------------------------------------------------------------------
def test_the_documented_example_loads_renders_and_reads_as_the_docs_say(tmp_path):
    page = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    section = page.split("## A format from a YAML file", 1)[1]
    path = tmp_path / "my_judge.yaml"
    path.write_text(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    fmt = get_judge_format(str(path))
    rubric = Rubric("Is it correct?", ("Wrong.", "Weak.", "Good.", "Exact."))
    with_ref = fmt.absolute_prompt("2+2?", "4 {x}", rubric, "4")
    assert with_ref.system == "You grade answers on a 1-4 scale. Never write {braces}."
    assert "## Answer\n4 {x}\n<ref>4</ref>\nCriteria: Is it correct?\n- 1: Wrong.\n- 2: Weak.\n" in with_ref.user
    assert "<ref>" not in fmt.absolute_prompt("2+2?", "4", rubric, None).user
    assert fmt.relative_prompt("q", "a", "b", rubric, None).user.splitlines()[3] == "Reference: (none)"
    parsed = fmt.parse("Right, and short.\nVerdict: 4.</s>", "absolute")
    assert (parsed.feedback, parsed.verdict) == ("Right, and short.", 4)
    assert fmt.parse("Verdict: 3. On reflection, 3.", "absolute").reason == (
        "my-judge: the last verdict does not end the output (after it: 'On reflection, 3.')"
    )
    assert fmt.parse("Answer 2 is exact. Verdict: 2", "relative").verdict == "B"
    assert fmt.verdict_labels("relative") == ("1", "2") and fmt.name.startswith("my-judge@")
