"""Judge formats at the jobs' command line (issue 44): a format refused for a task lists only the formats that judge
it (never the refused one), and a pairwise-only format runs ``compare`` and ``pairs`` without ``--rubric`` (its
prompt has no rubric slot: docs/formats.md, a rubric is accepted and ignored)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prom_reward.cli.main import main
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, get_judge_format
from tests.judges import verdict_output
from tests.reward_faults import Case

JOB_TASKS = {"grade": "absolute", "compare": "relative", "pairs": "relative"}
ROWS = {
    "grade": {"instruction": "2+2?", "response": "4"},
    "compare": {"instruction": "2+2?", "response_a": "Zq4", "response_b": "Zq5"},
    "pairs": {"prompt": "2+2?", "completions": ["Zq4", "Zq5", "Zq6"]},
}
PAIRS = ["--strategy", "all_pairs"]


def judges(task: str) -> list[str]:
    return [n for n in JUDGE_FORMATS.names() if task in JUDGE_FORMATS.get(n).tasks]


def write(tmp_path: Path, job: str) -> str:
    path = tmp_path / f"{job}.jsonl"
    path.write_text(json.dumps(ROWS[job]) + "\n")
    return str(path)


REFUSED = [(job, n) for job, task in JOB_TASKS.items() for n in JUDGE_FORMATS.names() if n not in judges(task)]


@pytest.mark.parametrize(("job", "name"), REFUSED)
def test_a_refused_format_is_told_only_the_formats_that_judge_the_task(job, name, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    extra = PAIRS if job == "pairs" else []
    argv = [job, write(tmp_path, job), "-o", str(out), "--server", "http://127.0.0.1:9/v1", "--format", name]
    assert main([*argv, "--rubric", "helpfulness", *extra]) == 2 and not out.exists()
    err = capsys.readouterr().err
    offered = re.search(r"pick a format that does \(([^)]*)\)", err)
    assert err.count("\n") == 1 and offered is not None, err
    assert offered.group(1).split(", ") == judges(JOB_TASKS[job])  # the refused format is not among them


def answer(fmt: JudgeFormat):
    """The lower number wins (response A is shown before B in every format's prompt)."""

    def respond(user: str) -> str:
        a, b = re.findall(r"Zq([456])", user)
        return verdict_output(fmt, "relative", "A" if a < b else "B")

    return respond


PAIRWISE_ONLY = [n for n in JUDGE_FORMATS.names() if JUDGE_FORMATS.get(n).tasks == {"relative"}]


@pytest.mark.parametrize("job", ["compare", "pairs"])
@pytest.mark.parametrize("name", PAIRWISE_ONLY)
def test_a_pairwise_only_format_needs_no_rubric(job, name, tmp_path, stand_in, capsys):
    judge = stand_in(Case(), answer=answer(get_judge_format(name)))
    out = tmp_path / "out.jsonl"
    extra = PAIRS if job == "pairs" else []
    argv = [job, write(tmp_path, job), "-o", str(out), "--server", judge.url, "--format", name, *extra]
    assert main(argv) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    if job == "compare":
        assert [r["winner"] for r in rows] == ["A"] and rows[0]["judge_error"] is None
    else:
        assert {(r["chosen"], r["rejected"]) for r in rows} == {("Zq4", "Zq5"), ("Zq4", "Zq6"), ("Zq5", "Zq6")}
    assert main([*argv, "--overwrite", "--rubric", "honesty"]) == 0  # a rubric given is accepted and ignored
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows


def test_a_format_that_shows_a_rubric_still_needs_one(tmp_path, capsys):
    argv = ["compare", write(tmp_path, "compare"), "-o", str(tmp_path / "o.jsonl"), "--server", "http://127.0.0.1:9/v1"]
    assert main(argv) == 2 and "no rubric" in capsys.readouterr().err
