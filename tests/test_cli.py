"""``prom-reward grade`` end to end against a real vLLM server (and the console script)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prom_reward.cli import main
from prom_reward.io import read_rows

pytestmark = pytest.mark.integration


def write_rows(path, n):
    rows = [{"id": i, "instruction": f"Question {i}?", "response": f"Answer {i}.",
             "reference_answer": "A reference." if i % 2 else None, "rubric": "helpfulness"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_grade_jsonl_via_server_and_resume(tmp_path, vllm_server):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = write_rows(src, 5)
    argv = ["grade", str(src), "-o", str(out), "--server", vllm_server, "--max-tokens", "8",
            "--batch-size", "2", "--quiet"]
    assert main(argv) == 0
    got = list(read_rows(out))
    assert [r["id"] for r in got] == [r["id"] for r in rows]
    for r in got:  # the tiny random model writes no verdicts: None, never a made-up number
        assert r["score"] is None and r["judge_failures"] >= 1 and "probabilities" in r
    # simulate an interrupted run: keep 3 rows, resume, and the rest is appended
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:3]))
    assert main(argv + ["--resume"]) == 0
    assert [r["id"] for r in read_rows(out)] == [0, 1, 2, 3, 4]


def test_grade_parquet_in_and_out(tmp_path, vllm_server):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"instruction": "Say hi", "response": "hi"}, {"instruction": "Count to 2", "response": "1 2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    assert main(["grade", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.parquet"), "--server",
                 vllm_server, "--rubric", "reasoning", "--max-tokens", "4", "--quiet"]) == 0
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["instruction"] for r in got] == ["Say hi", "Count to 2"] and all("score" in r for r in got)


def test_missing_column_is_a_clear_error(tmp_path, vllm_server, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"prompt": "x", "response": "y"}) + "\n")
    assert main(["grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--server", vllm_server,
                 "--rubric", "helpfulness", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'instruction' missing" in err and "--instruction-col" in err


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "prom_reward.cli", "grade", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--rubric" in out and "--server" in out
    assert subprocess.run([sys.executable, "-m", "prom_reward.cli", "grade", "x.jsonl", "-o", "y.jsonl"],
                          capture_output=True, text=True).returncode == 2
