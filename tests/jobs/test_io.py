"""Streaming row files: JSONL, JSON and Parquet."""

import json

import pytest

from prom_reward import ConfigError, InputError
from prom_reward.jobs.io import RowWriter, count_rows, read_rows


def test_jsonl_roundtrip_and_append(tmp_path):
    path = tmp_path / "x.jsonl"
    with RowWriter(path) as w:
        w.write([{"a": 1, "p": {"1": 0.5}}])
    with RowWriter(path, append=True) as w:
        w.write([{"a": 2, "p": None}])
    assert [r["a"] for r in read_rows(path)] == [1, 2] and count_rows(path) == 2


def test_partial_last_line_is_not_counted(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2')
    assert count_rows(path) == 1


def test_parquet_roundtrip_with_none_first_chunk(tmp_path):
    path = tmp_path / "x.parquet"
    with RowWriter(path) as w:
        w.write([{"q": "a", "score": None, "feedback": None}])
        w.write([{"q": "b", "score": 4.0, "feedback": "good"}])
    rows = list(read_rows(path))
    assert rows == [{"q": "a", "score": None, "feedback": None}, {"q": "b", "score": 4.0, "feedback": "good"}]


def test_json_array(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"a": 1}]))
    assert list(read_rows(path)) == [{"a": 1}]


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(InputError, match=r"x.jsonl:2"):
        list(read_rows(path))


def test_unknown_suffix():
    with pytest.raises(ConfigError, match=".jsonl, .json or .parquet"):
        list(read_rows("x.csv"))
