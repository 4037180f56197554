"""The configuration canary of the jobs (``prom_reward.rewards.startup`` in ``jobs.run.run_job``), through the real
``prom-reward grade`` / ``compare`` / ``pairs`` commands against judge servers on 127.0.0.1: a URL without ``/v1``
(404), a refused key (401) and a model the server does not serve stop the job before a row is judged, exit 2 with
the URL, the cause and the fix; a judge that is down is not misconfigured: the job runs as before (its rows fail
with "backend failed", marked for ``--resume``)."""

from __future__ import annotations

import json

import pytest

from prom_reward.cli.main import main
from prom_reward.format.judge_format import JUDGE_FORMATS, get_judge_format
from prom_reward.format.rubrics import get_rubric
from prom_reward.jobs.summary import EXIT_JUDGE_DOWN
from prom_reward.rewards.startup import CANARY_INSTRUCTION, CANARY_RESPONSES, canary_rubric
from tests.fakes import FakeServer, StandInJudge
from tests.jobs.helpers import JOBS, REPO, judge_server, rows, write


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


def docs_format(tmp_path) -> str:
    """The docs' own ``my_judge.yaml`` (docs/formats.md, "A format from a YAML file"), written to ``tmp_path``."""
    text = (REPO / "docs" / "formats.md").read_text()
    block = text.split("```yaml\n# my_judge.yaml", 1)[1].split("```", 1)[0]
    path = tmp_path / "my_judge.yaml"
    path.write_text("# my_judge.yaml" + block)
    return str(path)


def scale_rubric(fmt, task: str, tmp_path) -> str:
    """A rubric file that fits ``fmt`` for ``task``: one description per score of its scale (none to compare)."""
    n = len(fmt.scale) if task == "absolute" else 0
    path = tmp_path / "rubric.json"
    rubric = {"criteria": "Is it the run's own rubric?", "descriptions": [f"d{k}" for k in range(n)]}
    path.write_text(json.dumps(rubric))
    return str(path)


def canary_prompt(fmt, task: str, rubric) -> str:
    """The user message of the canary judged in ``fmt`` with ``rubric``."""
    if task == "absolute":
        return fmt.absolute_prompt(CANARY_INSTRUCTION, CANARY_RESPONSES[0], rubric, None).user
    return fmt.relative_prompt(CANARY_INSTRUCTION, *CANARY_RESPONSES, rubric, None).user


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("name", [*JUDGE_FORMATS, "my_judge.yaml"])
def test_the_canary_judges_with_the_jobs_own_format_and_rubric(job, name, tmp_path, capsys):
    """Issue 44: the canary graded a built-in 5-level rubric whatever the format (a 3-point or binary format, a
    pairwise-only one on pairs, the docs' YAML format exited 2 on a rubric the job never sends)."""
    name = docs_format(tmp_path) if name == "my_judge.yaml" else name
    fmt = get_judge_format(name)
    task = "absolute" if job == "grade" or (job == "pairs" and "absolute" in fmt.tasks) else "relative"
    if task not in fmt.tasks:
        return  # refused at start naming what it supports: tests/jobs/test_job_formats.py
    more = ["--strategy", "all_pairs"] if job == "pairs" and task == "relative" else []  # a pairwise-only format
    judge = StandInJudge().start()
    src, out = write(tmp_path / "in.jsonl", rows(job, 2)), tmp_path / "out.jsonl"
    rubric = scale_rubric(fmt, task, tmp_path)
    try:
        args = [job, str(src), "-o", str(out), "--server", judge.url, "--format", name, "--rubric", rubric]
        code = main([*args, "--quiet", "--outage-budget-s", "0", *more])
    finally:
        judge.stop()
    assert code != 2, capsys.readouterr().err
    assert out.exists() and judge.prompts, "the canary and the rows were judged"
    assert judge.prompts[0].endswith(canary_prompt(fmt, task, get_rubric(rubric)))  # the job's rubric, its format


@pytest.mark.parametrize("name", ["flow-judge-3", "flow-judge-binary", "prometheus2"])
def test_a_job_of_row_rubrics_has_its_canary_judged_on_the_formats_scale(name, tmp_path, capsys):
    """No rubric for every row (each row's rubric column): the canary gets the binary rubric a checklist criterion
    gets on the format's scale, so the format's rubric check passes and the route, key and model are checked."""
    fmt = get_judge_format(name)
    judge = StandInJudge().start()
    own = {"criteria": "Row rubric?", "descriptions": [f"d{k}" for k in fmt.scale]}
    src = write(tmp_path / "in.jsonl", [{**r, "rubric": own} for r in rows("grade", 2)])
    try:
        code = main(["grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--server", judge.url, "--format", name])
    finally:
        judge.stop()
    assert code == 0, capsys.readouterr().err
    assert judge.prompts[0].endswith(canary_prompt(fmt, "absolute", canary_rubric(fmt, "absolute", None)))
    assert "Does the response satisfy this criterion: the response answers the instruction?" in judge.prompts[0]
    assert all("Row rubric?" in p for p in judge.prompts[1:]) and len(judge.prompts) == 3
