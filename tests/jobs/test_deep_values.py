"""Input values nested deeper than a reader or a writer goes: JSON too deep for Python's parser stops the job at
the input check naming the line (it was a ``RecursionError`` traceback), and a column too deep for Parquet's reader
refuses a Parquet output before judging, naming the column (it failed when the judged parts were merged); a
JSON-lines output takes what Python reads."""

from __future__ import annotations

import json

import pytest

from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import InputError
from prom_reward.jobs.run import grade_file
from prom_reward.jobs.source import read_rows


def _line(depth: int) -> str:
    return '{"instruction": "Q?", "response": "good", "x": ' + "[" * depth + "]" * depth + "}\n"


@pytest.fixture
def judge():
    seen: list = []
    return seen, {"backend": ScriptedBackend(respond=lambda r, i: seen.append(r) or "Fine. [RESULT] 4")}


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_json_too_deep_to_parse_is_refused_naming_the_line(tmp_path, judge, suffix):
    seen, kwargs = judge
    src = tmp_path / f"in.{suffix}"
    text = json.dumps({"instruction": "Q?", "response": "good"}) + "\n" + _line(100_000)
    src.write_text(text if suffix == "jsonl" else "[" + ",".join(text.splitlines()) + "]")
    said = r"in.jsonl:2: JSON nested too deeply to read; fix:" if suffix == "jsonl" else r"in.json: not a JSON array"
    with pytest.raises(InputError, match=said):
        grade_file(src, tmp_path / "out.jsonl", kwargs, rubric="helpfulness", progress=False)
    assert seen == [] and not (tmp_path / "out.jsonl").exists()


def test_a_column_too_deep_for_parquet_refuses_a_parquet_output_before_judging(tmp_path, judge):
    seen, kwargs = judge
    src = tmp_path / "in.jsonl"
    src.write_text(_line(300))
    with pytest.raises(InputError, match=r"column 'x' cannot go to a Parquet output .*fix: write a .jsonl output"):
        grade_file(src, tmp_path / "out.parquet", kwargs, rubric="helpfulness", progress=False)
    assert seen == [] and not (tmp_path / "out.parquet").exists()
    grade_file(src, tmp_path / "out.jsonl", kwargs, rubric="helpfulness", progress=False)
    assert [r["score"] for r in read_rows(tmp_path / "out.jsonl")] == [4.0]
