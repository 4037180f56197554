"""``prom-reward serve`` / JudgeServers: real vLLM servers as subprocesses on CPU."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.fakes import free_port
from prom_reward import ConfigError
from prom_reward.backends.servers import JudgeServers, ServeConfig


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


# serve's own loop, with a stand-in for the vLLM command (http.server answers GET /health from a file named
# "health"): the real vLLM server under `prom-reward serve` runs in tests/backends/test_failover.py
FAKE_SERVE = """
import sys
from prom_reward.backends import servers as serve
from prom_reward.cli.main import main

def command(self, model_path, index):
    return [sys.executable, "-m", "http.server", str(self.port + index), "--bind", "127.0.0.1",
            "--directory", model_path]

serve.ServeConfig.command = command
sys.exit(main(sys.argv[1:]))
"""


def test_cli_serve_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path):
    (tmp_path / "health").write_text("ok")
    port = free_port()
    # started as a background job of a non-interactive shell is: SIGINT inherited *ignored*; Ctrl-C
    # (SIGINT) must still stop it (seen in a CI run launched that way: it hung until killed)
    proc = subprocess.Popen([sys.executable, "-c", FAKE_SERVE, "serve", "--model", str(tmp_path), "--port", str(port),
                             "--log-dir", str(tmp_path / "logs")], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = proc.stdout.readline()
        assert f"judge servers ready: http://127.0.0.1:{port}/v1" in line, line
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        time.sleep(1.5)  # serve is in its watch loop
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert "judge servers stopped" in proc.stdout.read()
        with pytest.raises(httpx.HTTPError):  # its server's process group was stopped with it
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        assert "GET /health" in (tmp_path / "logs" / "judge-0.log").read_text()  # the server's output: --log-dir
    finally:
        if proc.poll() is None:
            proc.kill()
