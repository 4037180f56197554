"""``prom-reward compare`` (``prom_reward.jobs.compare``) with a scripted judge: columns, swap, ties,
failures, resume, Parquet output, and the ``--ray`` wiring (Ray itself: tests/jobs/test_ray_grade.py)."""

from __future__ import annotations

import json

import pytest

import prom_reward.cli.jobs as cli
from prom_reward.cli.main import main
from prom_reward.jobs.io import read_rows


def _section(user: str, name: str) -> str:
    return user.split(f"###{name}:\n")[1].split("\n\n###")[0]


def _respond(request, i):
    """good beats bad; "either" vs "either": always the first position (position bias); "mute": no verdict."""
    a, b = _section(request.user, "Response A"), _section(request.user, "Response B")
    if "mute" in (a, b):
        return "I would rather not say."
    if a.startswith("either") and b.startswith("either"):
        return "The first one. [RESULT] A"
    return "Compared. [RESULT] " + ("A" if a.startswith("good") else "B")


@pytest.fixture
def seen(monkeypatch):
    from prom_reward import PrometheusJudge
    from prom_reward.backends.scripted import ScriptedBackend

    requests: list = []

    def respond(request, i):
        requests.append(request.user)
        return _respond(request, i)

    monkeypatch.setattr(cli, "build_judge", lambda args: PrometheusJudge(
        backend=ScriptedBackend(respond=respond), num_samples=args.num_samples, max_retries=0))
    return requests


ROWS = [
    {"id": 0, "instruction": "Q0?", "response_a": "good 0", "response_b": "bad 0", "rubric": "helpfulness"},
    {"id": 1, "instruction": "Q1?", "response_a": "bad 1", "response_b": "good 1", "rubric": "harmlessness",
     "reference_answer": "R1"},
    {"id": 2, "instruction": "Q2?", "response_a": "either x", "response_b": "either y", "rubric": "helpfulness"},
    {"id": 3, "instruction": "Q3?", "response_a": "mute", "response_b": "good 3", "rubric": "helpfulness"},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_compare_swap_ties_and_failures(tmp_path, seen, capsys):
    src, out = _write(tmp_path / "in.jsonl", ROWS), tmp_path / "out.jsonl"
    assert main(["compare", str(src), "-o", str(out), "--model", "m", "--quiet"]) == 0
    got = list(read_rows(out))
    assert [r["id"] for r in got] == [0, 1, 2, 3] and len(seen) == 8  # both orders of every row
    assert all(r[k] == ROWS[i][k] for i, r in enumerate(got) for k in ROWS[i])  # the input columns stay
    assert [(r["winner"], r["tie"], r["swap_agreement"]) for r in got] == [
        ("A", False, True), ("B", False, True), (None, True, False), (None, False, None)]
    assert [r["p_a"] for r in got[:3]] == [1.0, 0.0, 0.5] and got[3]["p_a"] is None
    assert [r["judge_error"] for r in got] == [None, None, "tie: the two orders disagree",
                                               "no verdict in 2 sample(s) (no parseable [RESULT])"]
    assert [r["judge_failures"] for r in got] == [0, 0, 0, 2] and got[0]["feedback"] == "Compared."
    assert {"judge_retries", "forced_verdicts"} <= set(got[0])
    # the row's rubric and reference answer went into its prompts (the swapped order: A and B exchanged)
    assert "###Reference Answer:\nR1" in seen[1] and "avoid harmful" in seen[1]
    assert _section(seen[4], "Response A") == "bad 0" and _section(seen[4], "Response B") == "good 0"
    assert "compared 4 rows (0 resumed)" in capsys.readouterr().err

    # one order only: position bias decides row 2, and there is no swap agreement
    seen.clear()
    assert main(["compare", str(src), "-o", str(out), "--model", "m", "--no-swap", "--quiet"]) == 0
    got = list(read_rows(out))
    assert len(seen) == 4 and [r["winner"] for r in got] == ["A", "B", "A", None]
    assert all(r["swap_agreement"] is None for r in got) and got[3]["judge_error"].startswith("no verdict in 1 ")


def test_compare_missing_columns_name_row_column_and_flag(tmp_path, seen, capsys):
    rows = [{"instruction": "Q?", "response_a": "good", "answer_b": "bad"}] * 3
    rows[1] = {"instruction": "Q?", "response_a": "good"}
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    argv = ["compare", str(src), "-o", str(out), "--model", "m", "--rubric", "helpfulness", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "row 0: column 'response_b' missing" in err and "--response-b-col" in err and seen == []
    assert main(argv + ["--response-b-col", "answer_b"]) == 2  # row 1 lacks it too, found before any judging
    err = capsys.readouterr().err
    assert "row 1: column 'answer_b' missing" in err and "--response-b-col" in err and seen == []
    # row numbers count from the start of the file, not of the batch
    assert main(argv + ["--response-b-col", "answer_b", "--batch-size", "1"]) == 2
    assert "row 1: column 'answer_b' missing" in capsys.readouterr().err
    # no --rubric and no rubric column
    ok = [{"instruction": "Q?", "response_a": "good", "response_b": "bad", "rubric": "helpfulness"},
          {"instruction": "Q?", "response_a": "good", "response_b": "bad"}]
    assert main(["compare", str(_write(src, ok)), "-o", str(out), "--model", "m", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "row 1" in err and "'rubric' missing" in err and "--rubric NAME|FILE" in err
    assert main(["compare", str(src), "-o", str(out)]) == 2  # no judge given


def test_compare_resume_judges_only_the_rest(tmp_path, seen):
    rows = [{"id": i, "instruction": f"Q{i}?", "response_a": f"good {i}", "response_b": f"bad {i}"} for i in range(5)]
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    argv = ["compare", str(src), "-o", str(out), "--model", "m", "--rubric", "helpfulness", "--batch-size", "2",
            "--quiet"]
    assert main(argv) == 0 and len(seen) == 10
    full = list(read_rows(out))
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:2]))  # an interrupted run
    seen.clear()
    assert main(argv + ["--resume"]) == 0
    assert len(seen) == 6 and list(read_rows(out)) == full and [r["winner"] for r in full] == ["A"] * 5


def test_compare_parquet_output_types_a_null_first_batch(tmp_path, seen):
    """swap_agreement is null in the whole first batch and a bool later: still one Parquet schema."""
    src, out = _write(tmp_path / "in.jsonl", [ROWS[3], ROWS[0]]), tmp_path / "out.parquet"
    assert main(["compare", str(src), "-o", str(out), "--model", "m", "--batch-size", "1", "--quiet"]) == 0
    got = list(read_rows(out))
    assert [r["swap_agreement"] for r in got] == [None, True] and [r["winner"] for r in got] == [None, "A"]


def test_ray_worker_backend_failure_gives_null_winners():
    from prom_reward.backends.scripted import ScriptedBackend
    from prom_reward.jobs.compare import COMPARE_COLUMNS, is_failure
    from prom_reward.jobs.ray_run import _JudgeWorker

    worker = _JudgeWorker({"judge": {"backend": ScriptedBackend(outputs=[])}, "rubric": "helpfulness",
                           "swap": True, "columns": COMPARE_COLUMNS})
    got = worker._compare([dict(r) for r in ROWS[:2]], 0)
    assert [r["id"] for r in got] == [0, 1] and all(r["winner"] is None and is_failure(r) for r in got)
    assert all(r["judge_error"].startswith("backend failed: ") and r["judge_failures"] == 2 for r in got)


def test_compare_ray_flags_reach_compare_dataset(tmp_path, monkeypatch, capsys):
    from prom_reward.jobs import ray_run as ray_grade
    from prom_reward.jobs.ray_config import RaySummary

    calls = []

    def fake(inputs, output, **kw):
        calls.append((inputs, output, kw))
        return RaySummary(rows=3, failed=1, ties=1, output=str(output))

    monkeypatch.setattr(ray_grade, "compare_dataset", fake)
    assert main(["compare", "in.jsonl", "-o", "out.parquet", "--model", "m", "--ray", "--replicas", "2",
                 "--no-swap", "--response-a-col", "left", "--batch-size", "7", "--rubric", "helpfulness",
                 "--quiet"]) == 0
    (inputs, output, kw), = calls
    assert (inputs, output, kw["swap"], kw["rubric"], kw["response_a_col"], kw["response_b_col"]) == (
        "in.jsonl", "out.parquet", False, "helpfulness", "left", "response_b")
    assert (kw["config"].rows_per_shard, kw["config"].replicas, kw["judge"]["model"]) == (7, 2, "m")
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["ties"] == 1 and "1 ties" in err
