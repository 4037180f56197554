"""The exit status of ``grade``, ``compare`` and ``pairs`` through the command line (``main``, what ``python -m
prom_reward.cli`` exits with, in this process; the outage policy's cells in a child process, whose log lines reach
its stderr), a real HTTP judge on 127.0.0.1: 0 when every row has its outcome, 3 when the backend failed some rows
(``--resume`` judges them again), 4 when the judge could not be reached for any row, with the URL and the cause on
the error line; stdout holds the JSON summary in every case."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest

from prom_reward.cli.main import main
from prom_reward.jobs.summary import EXIT_CODES, EXIT_JUDGE_DOWN, EXIT_SOME_FAILED
from tests.fakes import FakeServer, free_port
from tests.jobs.helpers import JOBS, argv, chat, cli, rows, write


@pytest.fixture
def command(capfd: pytest.CaptureFixture[str]) -> Callable[[list[str]], subprocess.CompletedProcess]:
    """``command(args)``: ``prom-reward ARGS`` run by ``main`` in this process (a child process cost a second of
    imports per call), its exit status and output as ``helpers.cli`` gives them."""

    def run(args: list[str]) -> subprocess.CompletedProcess:
        capfd.readouterr()
        try:
            code = main(args)
        except SystemExit as stop:  # argparse: --help, a bad flag
            code = stop.code
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("prom-reward: error:")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("job", JOBS)
def test_an_unreachable_judge_exits_4_with_the_url_and_the_cause(tmp_path, job, command):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    src = write(tmp_path / "in.jsonl", rows(job, 3))
    done = command(argv(job, src, tmp_path / "out.jsonl", url))
    assert done.returncode == EXIT_JUDGE_DOWN, done.stderr[-3000:]
    line = _error_line(done.stderr)
    assert line.startswith(f"prom-reward: error: {job}: the judge {url} could not be reached or refused every request")
    assert "Cannot connect to host" in line and "--resume" in line
    summary = json.loads(done.stdout)  # the summary is still the whole of stdout
    assert summary["backend_failed"] >= summary["rows"] == 3 and summary["backend_error"].startswith("backend failed")


def test_some_rows_failed_by_the_backend_exit_3_and_a_resume_exits_0(tmp_path, command):
    answer, broken = chat(), {"on": True}

    def reply(k: int, body: dict):  # row 1 always gets a 500 while the judge is broken
        if broken["on"] and "Q1?" in body["messages"][-1]["content"]:
            return 500, {"error": {"message": "judge worker crashed"}}
        return answer(k, body)

    server = FakeServer({"/v1/chat/completions": reply, "/v1/models": lambda k, b: (200, {"data": [{"id": "judge"}]})})
    try:
        src, out = write(tmp_path / "in.jsonl", rows("grade", 6)), tmp_path / "out.jsonl"
        done = command(argv("grade", src, out, server.url))
        assert done.returncode == EXIT_SOME_FAILED, done.stderr[-3000:]
        assert "prom-reward: error:" not in done.stderr and "run again with --resume" in done.stderr
        summary = json.loads(done.stdout)
        assert (summary["rows"], summary["backend_failed"]) == (6, 1) and "HTTP 500" in summary["backend_error"]
        broken["on"] = False
        again = command(argv("grade", src, out, server.url, "--resume"))
        assert again.returncode == 0, again.stderr[-3000:]
        assert json.loads(again.stdout)["backend_failed"] == 0
        assert all(json.loads(r)["score"] is not None for r in out.read_text().splitlines())
    finally:
        server.stop()


@pytest.mark.parametrize("job", JOBS)
def test_backend_failed_counts_only_the_rows_the_backend_failed(tmp_path, job, command):
    """Row 0 gets no verdict from the judge, row 1 a 500, in one batch: 2 failed, 1 of them by the backend, exit 3
    (it counted every failed row of a batch with a backend failure: 2 of 2 rows, exit 4 "could not be reached")."""
    answer = chat()

    def reply(k: int, body: dict):
        user = body["messages"][-1]["content"]
        if "Q0?" in user:
            return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hmm."}}]}
        return (500, {"error": {"message": "judge worker crashed"}}) if "Q1?" in user else answer(k, body)

    server = FakeServer({"/v1/chat/completions": reply, "/v1/models": lambda k, b: (200, {"data": [{"id": "judge"}]})})
    try:
        src = write(tmp_path / "in.jsonl", rows(job, 2))
        done = command(argv(job, src, tmp_path / "out.jsonl", server.url))
        assert done.returncode == EXIT_SOME_FAILED, done.stderr[-3000:]
        summary = json.loads(done.stdout)
        assert (summary["rows"], summary["failed"], summary["backend_failed"]) == (2, 2, 1), summary
        assert re.search(r" 1 [a-z ]+ failed because the judge backend failed", done.stderr), done.stderr[-3000:]
    finally:
        server.stop()


@pytest.mark.parametrize("job", JOBS)
def test_help_lists_the_exit_statuses(job, command):
    done = command([job, "--help"])
    assert done.returncode == 0 and "exit status: 0 every row judged has its outcome" in " ".join(done.stdout.split())
    assert EXIT_CODES.startswith("exit status:")


@pytest.mark.parametrize("job", JOBS)
def test_a_judge_that_fails_a_while_is_waited_out_by_the_jobs_outage_policy(tmp_path, job):
    """The transport makes one attempt per request; the job's outage policy asks again for what failed (after a
    back-off, within ``--outage-budget-s``), so a judge that answers 503 for a while still judges every row."""
    answer = chat()

    def reply(k: int, body: dict):  # the first three calls fail: an engine still loading
        return (503, {"error": {"message": "engine loading"}}) if k <= 3 else answer(k, body)

    server = FakeServer({"/v1/chat/completions": reply, "/v1/models": lambda k, b: (200, {"data": [{"id": "judge"}]})})
    try:
        src, out = write(tmp_path / "in.jsonl", rows(job, 6)), tmp_path / "out.jsonl"
        done = cli(argv(job, src, out, server.url, "--outage-budget-s", "30", "--outage-backoff-s", "0.05"))
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["backend_failed"] == 0 and summary["failed"] == 0 and summary["rows"] == 6
    assert "engine loading" in done.stderr and "asking again" in done.stderr  # the policy's log line


def test_outage_on_exhausted_raise_stops_the_job_with_exit_4(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    src, out = write(tmp_path / "in.jsonl", rows("grade", 3)), tmp_path / "out.jsonl"
    done = cli(argv("grade", src, out, url, "--outage-on-exhausted", "raise"))
    assert done.returncode == EXIT_JUDGE_DOWN, done.stderr[-3000:]
    assert "JudgeUnavailableError" in done.stderr or "has been failing" in done.stderr
    assert not out.exists()  # stopped before a row was committed


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--outage-backoff-s", "-1", "--outage-backoff-s: expected seconds >= 0, got -1.0"),
        ("--outage-budget-s", "nan", "--outage-budget-s: expected seconds >= 0, got nan"),  # waited forever
        (
            "--outage-call-timeout-s",
            "nan",
            "--outage-call-timeout-s: expected seconds > 0 or null (null: derived from the deadline), got nan",
        ),
    ],
)
def test_a_bad_outage_flag_names_the_flag(tmp_path, flag, value, said, command):
    src = write(tmp_path / "in.jsonl", rows("grade", 1))
    done = command(argv("grade", src, tmp_path / "out.jsonl", "http://127.0.0.1:9/v1", flag, value))
    assert done.returncode == 2 and said in done.stderr, done.stderr
