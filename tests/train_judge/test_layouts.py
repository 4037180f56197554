"""Feedback / Preference Collection files with bad rows or bad bytes: one error naming the file, the row
(or line) and the field, before anything is trained; good files with a BOM, CRLF or blank lines load."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from prom_reward.errors import InputError
from train_judge.layouts import load_feedback_collection, load_preference_collection, save_preference_collection

REPO = Path(__file__).resolve().parents[2]


def _fc(**kw: object) -> dict:
    row = {
        "orig_instruction": "Explain tides.",
        "orig_response": "The moon pulls the sea.",
        "orig_reference_answer": "Gravity of the moon and sun.",
        "orig_criteria": "Is it correct?",
        "orig_feedback": "Mostly right.",
        "orig_score": 4,
        **{f"orig_score{k}_description": f"Level {k}." for k in range(1, 6)},
    }
    row.update(kw)
    return row


def _pc(**kw: object) -> dict:
    row = {
        "orig_instruction": "q",
        "orig_response_A": "a",
        "orig_response_B": "b",
        "orig_criteria": "Is it right?",
        "orig_feedback": "A is right.",
        "orig_preference": "A",
    }
    row.update(kw)
    return row


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _lines(*rows: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"orig_score": 4.5}, r"row 1: orig_score must be an integer 1\.\.5, got 4\.5"),
        ({"orig_score": 7}, r"row 1: orig_score must be an integer 1\.\.5, got 7"),
        ({"orig_score": "four"}, r"row 1: orig_score must be an integer 1\.\.5, got 'four'"),
        ({"orig_score": None}, r"row 1: orig_score must be an integer 1\.\.5, got None"),
        ({"orig_score": True}, r"row 1: orig_score must be an integer 1\.\.5, got True"),
        ({"orig_response": None}, r"row 1: orig_response must be a string, got NoneType"),
        ({"orig_response": ["a", "b"]}, r"row 1: orig_response must be a string, got list"),
        ({"orig_criteria": {"x": 1}}, r"row 1: orig_criteria must be a string, got dict"),
        ({"orig_score2_description": 2}, r"row 1: orig_score2_description must be a string, got int"),
        ({"orig_instruction": "\ud800"}, r"row 1: orig_instruction holds a lone surrogate"),
        ({"orig_feedback": "  "}, r"row 1: orig_feedback is empty"),
        ({"orig_reference_answer": 5}, r"row 1: orig_reference_answer must be a string"),
    ],
)
def test_bad_feedback_rows_name_file_row_and_field(tmp_path: Path, bad: dict, message: str) -> None:
    path = _write(tmp_path / "fc.jsonl", _lines(_fc(), _fc(**bad)))
    with pytest.raises(InputError, match=f"^{path}: {message}") as e:
        load_feedback_collection(path)
    assert e.value.index == 1 and e.value.field == next(iter(bad))


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"orig_response_B": None}, "orig_response_B"),
        ({"orig_feedback": ["x"]}, "orig_feedback"),
        ({"orig_criteria": None}, "orig_criteria"),
        ({"orig_feedback": ""}, "orig_feedback_A"),  # no pairwise feedback and no absolute ones to join
    ],
)
def test_bad_pair_rows_name_file_row_and_field(tmp_path: Path, bad: dict, field: str) -> None:
    path = _write(tmp_path / "pc.jsonl", _lines(_pc(), _pc(**bad)))
    with pytest.raises(InputError, match=f"^{path}: row 1: {field} must be a string") as e:
        load_preference_collection(path)
    assert e.value.index == 1 and e.value.field == field


GOOD = json.dumps(_fc()).encode() + b"\n"


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("fc.jsonl", GOOD + GOOD[:40], r":2: not valid JSON \(Unterminated string.*fix: repair or remove that line"),
        ("fc.jsonl", GOOD + b"hello\n" + GOOD, r":2: not valid JSON"),
        ("fc.jsonl", GOOD + GOOD.replace(b"Explain", b"\xff\xfeExplain"), r":2: not UTF-8 text \(byte 22: b'\\xff'"),
        ("fc.jsonl", GOOD + b"[1, 2]\n", r":2: expected a JSON object per line, got list"),
        ("fc.jsonl", b"", r": no rows"),
        ("fc.jsonl", b"\n \n", r": no rows"),
        ("fc.json", b"[" + GOOD + b", 3]", r" row 1: expected a JSON object, got int"),
        ("fc.json", b"[" + GOOD, r": not a JSON array of objects"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = _write(tmp_path / name, data)
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}{message}"):
        load_feedback_collection(path)


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf" + GOOD + GOOD,  # BOM
        GOOD.replace(b"\n", b"\r\n") * 2,  # CRLF
        GOOD + b"\n\n" + GOOD.rstrip(b"\n"),  # blank lines, no final newline
        b"[" + GOOD + b"," + GOOD + b"]",  # a JSON array
    ],
)
def test_good_files_in_any_framing_load(tmp_path: Path, data: bytes) -> None:
    recs = load_feedback_collection(_write(tmp_path / "fc.json", data))
    assert [(r.response, r.score, r.feedback) for r in recs] == [("The moon pulls the sea.", 4, "Mostly right.")] * 2


def test_scores_as_the_hub_stores_them_and_separators_in_text(tmp_path: Path) -> None:
    rows = [_fc(orig_score="5"), _fc(orig_score=3.0, orig_feedback="a\u2028b\x85c")]
    recs = load_feedback_collection(_write(tmp_path / "fc.jsonl", _lines(*rows)))
    assert [r.score for r in recs] == [5, 3] and recs[1].feedback == "a\u2028b\x85c"
    pairs = load_preference_collection(str(tmp_path / "fc.jsonl"), feedback="concatenate")
    out = tmp_path / "pc.jsonl"
    save_preference_collection(pairs, out)  # written with ensure_ascii=False: U+2028 raw in the line
    assert [p.feedback for p in load_preference_collection(str(out))] == [p.feedback for p in pairs]


def test_sft_cli_refuses_bad_data_with_status_2_before_training(tmp_path: Path, smollm2_dir: Path) -> None:
    data = _write(tmp_path / "fc.jsonl", _lines(_fc(), _fc(orig_score=4.5)))
    cfg = tmp_path / "run.yaml"
    out = tmp_path / "out"
    cfg.write_text(
        f"model: {smollm2_dir}\ntask: absolute\ndataset: {data}\nmax_length: 1024\nlora: {{r: 4}}\n"
        f"torch_threads: 1\noutput_dir: {out}\n",
        encoding="utf-8",
    )
    r = subprocess.run(
        [sys.executable, "-m", "train_judge.sft", str(cfg)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"error: {data}: row 1: orig_score must be an integer 1..5, got 4.5; fix the row" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


@pytest.mark.parametrize("rows", [0, None])
def test_an_empty_or_broken_parquet_file_names_the_file(tmp_path: Path, rows: int | None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "fc.parquet"
    if rows is None:
        path.write_bytes(b"PAR1 not really")
    else:
        pq.write_table(pa.table({"orig_instruction": pa.array([], pa.string())}), path)
    said = ": no rows" if rows == 0 else ": not a readable Parquet file"
    with pytest.raises(InputError, match="^" + re.escape(str(path)) + said):
        load_feedback_collection(str(path))


def test_saving_pairs_that_stop_midway_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "pc.jsonl"
    pairs = load_preference_collection(_write(tmp_path / "in.jsonl", _lines(_pc(), _pc(orig_preference="B"))))
    assert save_preference_collection(pairs, out) == 2
    before = out.read_bytes()

    def stops():
        yield pairs[0]
        raise KeyboardInterrupt("stopped while writing")

    with pytest.raises(KeyboardInterrupt):
        save_preference_collection(stops(), out)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "pc.jsonl"]
