"""Faults that must be survived: a judge server killed with SIGKILL in the middle of a 300-item job.

The victim is a real vLLM server started by ``prom-reward serve`` (``JudgeServers`` inside), so one
server start also covers the CLI end to end: ready line, ``prom-reward grade --server`` through it,
its log in ``--log-dir``, and ``serve`` noticing that its server died. (``serve``'s Ctrl-C handling:
``tests/backends/test_serve.py``.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from prom_reward import PrometheusJudge
from prom_reward.rewards.outage import Outage, OutagePolicy
from tests.fakes import free_port

pytestmark = pytest.mark.integration

N_ITEMS = 300


def test_kill_the_served_judge_mid_job_loses_and_duplicates_nothing(tiny_model_dir, vllm_server, tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prom_reward.cli",
            "serve",
            "--model",
            str(tiny_model_dir),
            "--port",
            str(port),
            "--max-model-len",
            "2048",
            "--enforce-eager",
            "--log-dir",
            str(logs),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1"),
    )
    try:
        deadline, line = time.monotonic() + 600, ""
        while time.monotonic() < deadline and "ready" not in line:
            line = serve.stdout.readline()
            assert line or serve.poll() is None, "serve exited before it was ready: " + serve.stderr.read()[-3000:]
        served = f"http://127.0.0.1:{port}/v1"
        assert served in line and httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200

        # prom-reward grade --server against what serve started, end to end through the CLI
        rows = tmp_path / "rows.jsonl"
        rows.write_text("".join(json.dumps({"instruction": f"Q{i}?", "response": f"A{i}."}) + "\n" for i in range(6)))
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "prom_reward.cli",
                "grade",
                str(rows),
                "-o",
                str(tmp_path / "g.jsonl"),
                "--rubric",
                "helpfulness",
                "--server",
                served,
                "--max-tokens",
                "8",
                "--force-verdict",
                "always",
                "--store",
                str(tmp_path / "j.sqlite"),
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert "grade: 6 rows (0 resumed)" in out.stderr
        graded = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
        assert [g["instruction"] for g in graded] == [f"Q{i}?" for i in range(6)]
        for g in graded:  # a verdict in 1..5, or None with every sample counted as a failure
            assert (g["score"] is None and g["judge_failures"] >= 1) or 1 <= g["score"] <= 5

        # the fault: serve's vLLM process (its own process group) SIGKILLed 3 s into a job over both servers
        (victim,) = psutil.Process(serve.pid).children()
        judge = PrometheusJudge(
            backend="openai",
            base_url=[vllm_server, served],
            sampling={"max_tokens": 2},
            max_retries=0,
            max_concurrency=32,
            timeout=60.0,
        )
        # the jobs' outage: what the killed server failed is asked again on the other URL
        outage = Outage(OutagePolicy(budget_s=120, backoff_s=0.2, max_backoff_s=1.0))
        killed = threading.Event()

        def kill_soon() -> None:
            time.sleep(3.0)  # the job is under way on both servers by then
            os.killpg(victim.pid, signal.SIGKILL)
            killed.set()

        threading.Thread(target=kill_soon, daemon=True).start()
        start = time.monotonic()
        grades = judge.grade(
            [f"Question {i}?" for i in range(N_ITEMS)],
            [f"Answer {i}." for i in range(N_ITEMS)],
            "helpfulness",
            outage=outage,
        )
        elapsed = time.monotonic() - start
        assert killed.is_set(), f"job finished in {elapsed:.1f}s, before the kill"
        victim.wait(timeout=60)  # gone once serve reaps it (a zombie until then: serve polls every second)
        assert len(grades) == N_ITEMS
        # exactly one judged sample per item: nothing lost, nothing judged twice into the result
        assert all(len(g.samples) == 1 for g in grades)
        assert judge.stats.samples == N_ITEMS and outage.health.failures >= 1  # some were asked again

        # serve notices its dead server: exit status 2 and a message naming it and the log folder
        assert serve.wait(timeout=60) == 2
        err = serve.stderr.read()
        assert "judge server(s) [0] exited" in err and str(logs) in err, err[-2000:]
        assert "judge servers stopped" in serve.stdout.read()
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        # the server's own output went to its own file in --log-dir (judge-<port>-<pid>.log), with the judged requests
        (log,) = logs.glob(f"judge-{port}-*.log")
        assert "POST /v1/chat/completions" in log.read_text(errors="replace")
    finally:
        if serve.poll() is None:
            serve.kill()
