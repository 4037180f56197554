"""``prom-reward serve`` / JudgeServers: real vLLM servers as subprocesses on CPU."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from prom_reward import ConfigError
from prom_reward.serve import JudgeServers, ServeConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gpu_layout_and_command():
    cfg = ServeConfig(model="m", gpus=(4, 5, 6, 7), tensor_parallel_size=2, port=9000, max_model_len=8192)
    assert cfg.gpu_groups() == [(4, 5), (6, 7)]
    assert cfg.urls() == ["http://127.0.0.1:9000/v1", "http://127.0.0.1:9001/v1"]
    cmd = cfg.command("m", 1)
    assert cmd[cmd.index("--port") + 1] == "9001" and "--enable-prefix-caching" in cmd
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2" and "--max-model-len" in cmd
    assert ServeConfig(model="m", gpus=(0, 1, 2, 3), replicas=1).gpu_groups() == [(0,)]
    assert ServeConfig(model="m").gpu_groups() == [()]


@pytest.mark.parametrize("kw, match", [
    ({"gpus": (4, 5, 6), "tensor_parallel_size": 2}, "groups of tensor_parallel_size=2"),
    ({"gpus": (4, 4)}, "twice"),
    ({"gpus": (4, 5), "replicas": 3}, "allow 1..2"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
])
def test_bad_layouts_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        ServeConfig(model="m", **kw)


@pytest.mark.integration
def test_dead_server_fails_fast_with_its_log(tmp_path):
    cfg = ServeConfig(model=str(tmp_path / "no-such-model"), port=free_port(), log_dir=str(tmp_path), startup_timeout=300)
    start = time.monotonic()
    with pytest.raises(Exception, match="exited with code"):
        JudgeServers(cfg).start()
    assert time.monotonic() - start < 300


@pytest.mark.integration
def test_cli_serve_runs_until_interrupted(tiny_model_dir, tmp_path):
    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    # started as a background job of a non-interactive shell is: SIGINT inherited *ignored*; Ctrl-C
    # (SIGINT) must still stop it (seen in a CI run launched that way: it hung until killed)
    proc = subprocess.Popen([sys.executable, "-m", "prom_reward.cli", "serve", "--model", str(tiny_model_dir),
                             "--port", str(port), "--max-model-len", "2048", "--enforce-eager",
                             "--log-dir", str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 600
        line = ""
        while time.monotonic() < deadline and "ready" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "serve exited before it was ready"
        url = f"http://127.0.0.1:{port}/v1"
        assert url in line
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        # prom-reward grade --server against what serve started, end to end through the CLI
        rows = tmp_path / "rows.jsonl"
        rows.write_text("".join(json.dumps({"instruction": f"Q{i}?", "response": f"A{i}."}) + "\n" for i in range(6)))
        out = subprocess.run([sys.executable, "-m", "prom_reward.cli", "grade", str(rows), "-o", str(tmp_path / "g.jsonl"),
                              "--rubric", "helpfulness", "--server", url, "--max-tokens", "8", "--force-verdict",
                              "--store", str(tmp_path / "j.sqlite"), "--quiet"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "graded 6 rows" in out.stderr
        graded = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
        assert [g["instruction"] for g in graded] == [f"Q{i}?" for i in range(6)]
        for g in graded:  # a verdict in 1..5, or None with every sample counted as a failure
            assert (g["score"] is None and g["judge_failures"] >= 1) or 1 <= g["score"] <= 5
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        # the server's own output went to --log-dir (JudgeServers' judge-<i>.log), with the judged requests
        assert "POST /v1/chat/completions" in (tmp_path / "judge-0.log").read_text(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
