"""The table of judge formats in docs/formats.md is ``formats_table()``: one row per registered format, each
naming the models whose presets pick it, with the format's own tasks, scale, verdicts and forcing text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prom_reward.core.presets import PRESETS, formats_table
from prom_reward.format.judge_format import DEFAULT_FORMAT, JUDGE_FORMATS, get_judge_format

PAGE = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


def page_table() -> str:
    found = re.search(r"<!-- formats:start -->\n(.*?)\n<!-- formats:end -->", PAGE.read_text(encoding="utf-8"), re.S)
    assert found, "docs/formats.md lost its formats:start/end markers"
    return found.group(1)


def rows() -> dict[str, list[str]]:
    out = {}
    for line in formats_table().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        out[re.match(r"`([^`]+)`", cells[0]).group(1)] = cells
    return out


def test_the_page_table_is_the_generated_one():
    assert page_table() == formats_table()


def test_one_row_per_registered_format_the_default_first():
    table = rows()
    assert sorted(table) == sorted(JUDGE_FORMATS) and len(table) >= 12
    assert next(iter(table)) == DEFAULT_FORMAT and table[DEFAULT_FORMAT][0].endswith("(default)")


@pytest.mark.parametrize(
    ("name", "tasks", "scale", "verdicts", "forced_after"),
    [
        ("prometheus2", "absolute, relative", "1..5", "`1`..`5`; `A`, `B`", '`" [RESULT] "`'),
        ("flow-judge-binary", "absolute", "0, 1", "`0`, `1`", '`"<score>"`'),
        ("flow-judge-3", "absolute", "1..3", "`1`..`3`", '`"<score>"`'),
        ("con-j", "relative", "none", "`1`, `2`", "not one token: never forced"),
        ("offsetbias", "relative", "none", "`a`, `b`", '`"Output ("`'),
    ],
)
def test_a_row_says_what_the_format_is(name, tasks, scale, verdicts, forced_after):
    assert rows()[name][2:] == [tasks, scale, verdicts, forced_after]


@pytest.mark.parametrize("name", sorted(JUDGE_FORMATS))
def test_the_models_column_is_the_presets(name):
    models = {PRESETS.get(p).model for p in PRESETS if PRESETS.get(p).format == name}
    cell = rows()[name][1]
    assert set(re.findall(r"`([^`]+)`", cell)) == (models or {"--format"})
    assert get_judge_format(name).name == name
