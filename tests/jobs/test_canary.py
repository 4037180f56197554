"""The configuration canary of the jobs (``prom_reward.core.canary`` in ``jobs.run.run_job``), through the real
``prom-reward grade`` / ``compare`` / ``pairs`` commands against judge servers on 127.0.0.1: a URL without ``/v1``
(404), a refused key (401) and a model the server does not serve stop the job before a row is judged, exit 2 with
the URL, the cause and the fix; a judge that is down is not misconfigured: the job runs as before (its rows fail
with "backend failed", marked for ``--resume``)."""

from __future__ import annotations

import json

import pytest

from prom_reward.cli.main import main
from prom_reward.jobs.summary import EXIT_JUDGE_DOWN
from tests.fakes import FakeServer, StandInJudge
from tests.jobs.helpers import JOBS, judge_server, rows, write


def _run(job: str, tmp_path, url: str, *more: str) -> tuple[int, str]:
    src, out = write(tmp_path / "in.jsonl", rows(job, 4)), tmp_path / "out.jsonl"
    flags = ["--rubric", "helpfulness", "--quiet", "--outage-budget-s", "0"]  # a judge that is down is not waited for
    code = main([job, str(src), "-o", str(out), "--server", url, *flags, *more])
    assert code != 0 or out.exists()
    if code == 2:
        assert not out.exists()  # the output is never touched by a job that refused to start
    return code, str(out)


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize(
    "fault, words",
    [
        ("no-v1", ["HTTP 404", "not the server's OpenAI-compatible API", "ends in /v1"]),
        ("401", ["HTTP 401", "PROM_REWARD_API_KEY"]),
        ("model", ["does not serve that model", "--model"]),
    ],
)
def test_a_misconfigured_judge_stops_the_job_at_start(job, fault, words, tmp_path, capsys):
    if fault == "no-v1":
        server = judge_server()
        url, chats = server.url.removesuffix("/v1"), lambda: len(server.bodies("/chat/completions"))
    else:
        stand_in = StandInJudge(refuse=401 if fault == "401" else None).start()
        server, url, chats = stand_in.server, stand_in.url, lambda: len(stand_in.graded)
    more = ["--model", "other"] if fault == "model" else []
    try:
        code, _ = _run(job, tmp_path, url, *more)
    finally:
        server.stop()  # type: ignore[union-attr]
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("prom-reward: error: judge http://127.0.0.1:"), err
    for w in words:
        assert w in err, (w, err)
    assert chats() == 0  # not one row judged


def test_a_judge_that_is_down_is_not_misconfigured(tmp_path, capsys):
    down = FakeServer({})  # a free port, then nothing listens there
    url = down.url
    down.stop()
    code, out = _run("grade", tmp_path, url)
    assert code == EXIT_JUDGE_DOWN  # not 2 (misconfigured): the rows wait for a --resume
    got = [json.loads(line) for line in open(out)]
    assert len(got) == 4 and all(r["judge_error"].startswith("backend failed") for r in got)
    assert "--resume" in capsys.readouterr().err


def test_a_healthy_judge_is_asked_the_canary_once(tmp_path):
    server = judge_server()
    try:
        code, out = _run("grade", tmp_path, server.url)
    finally:
        server.stop()
    assert code == 0 and [r["score"] for r in map(json.loads, open(out))] == [1.0, 5.0, 5.0, 1.0]
    assert len(server.bodies("/v1/chat/completions")) == 4 + 1
