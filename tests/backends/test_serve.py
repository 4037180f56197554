"""``prom-reward serve`` / JudgeServers: real vLLM servers as subprocesses on CPU."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from prom_reward import ConfigError
from prom_reward.backends.servers import JudgeServers, ServeConfig
from prom_reward.backends.vllm_options import VLLMOptions
from tests.fakes import free_port


def test_gpu_layout_and_command():
    cfg = ServeConfig(
        model="m", gpus=(4, 5, 6, 7), port=9000, engine=VLLMOptions(tensor_parallel_size=2, max_model_len=8192)
    )
    assert cfg.gpu_groups() == [(4, 5), (6, 7)]
    assert cfg.urls() == ["http://127.0.0.1:9000/v1", "http://127.0.0.1:9001/v1"]
    cmd = cfg.command("m", 1)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--port") + 1] == "9001" and "--enable-prefix-caching" in cmd
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2" and cmd[cmd.index("--max-model-len") + 1] == "8192"
    assert ServeConfig(model="m", gpus=(0, 1, 2, 3), replicas=1).gpu_groups() == [(0,)]
    assert ServeConfig(model="m").gpu_groups() == [()]


@pytest.mark.parametrize("gpus", [(), (4, 5)])
def test_every_replica_gets_an_explicit_memory_share_tokenizer_mode_and_logprob_limit(gpus):
    # with GPUs and without: vLLM's own default share (0.92) would leave no room for anything else on the GPU
    cmd = ServeConfig(model="m", gpus=gpus, engine=VLLMOptions(gpu_memory_utilization=0.4)).command("m", 0)
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.4"
    assert cmd[cmd.index("--tokenizer-mode") + 1] == "hf" and cmd[cmd.index("--max-logprobs") + 1] == "20"
    default = ServeConfig(model="m", gpus=gpus).command("m", 0)
    assert default[default.index("--gpu-memory-utilization") + 1] == "0.9"


def test_serve_cli_builds_the_config_from_a_preset_under_the_flags():
    from prom_reward.cli.main import build_parser
    from prom_reward.cli.servers import serve_config

    parser = build_parser()
    cfg = serve_config(
        parser.parse_args(
            [
                "serve",
                "--model",
                "prometheus-7b-v2.0",
                "--gpus",
                "0,1",
                "--gpu-memory-utilization",
                "0.5",
                "--no-prefix-caching",
            ]
        )
    )
    assert cfg.engine == VLLMOptions(
        dtype="bfloat16", max_model_len=8192, gpu_memory_utilization=0.5, enable_prefix_caching=False
    )  # the preset's dtype and context, the flags
    assert "--no-enable-prefix-caching" in cfg.command("m", 0) and cfg.gpu_groups() == [(0,), (1,)]
    cfg = serve_config(
        parser.parse_args(
            [
                "serve",
                "--model",
                "some/model",
                "--max-model-len",
                "4096",
                "--enforce-eager",
                "--seed",
                "3",
                "--tokenizer-mode",
                "mistral",
            ]
        )
    )
    assert cfg.engine == VLLMOptions(max_model_len=4096, enforce_eager=True, seed=3, tokenizer_mode="mistral")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"gpus": (4, 5, 6), "engine": VLLMOptions(tensor_parallel_size=2)}, "groups of tensor_parallel_size=2"),
        ({"gpus": (4, 4)}, "twice"),
        ({"gpus": (4, 5), "replicas": 3}, "allow 1..2"),
        ({"engine": {"gpu_memory_utilization": 0.5}}, "expected VLLMOptions"),
        ({"extra_args": ("--gpu-memory-utilization=0.5",)}, "ServeConfig sets itself"),
        ({"extra_args": ("--port", "1")}, "ServeConfig sets itself"),
        ({"port": 0}, "port"),
    ],
)
def test_bad_layouts_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        ServeConfig(model="m", **kw)


@pytest.mark.integration
def test_dead_server_fails_fast_with_its_log(tmp_path):
    cfg = ServeConfig(
        model=str(tmp_path / "no-such-model"), port=free_port(), log_dir=str(tmp_path), startup_timeout=300
    )
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
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FAKE_SERVE,
            "serve",
            "--model",
            str(tmp_path),
            "--port",
            str(port),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
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


def test_a_server_dies_with_the_process_that_started_it(tmp_path):
    """``prom-reward serve`` killed with SIGKILL cannot stop its servers itself: Linux sends them SIGTERM
    (``term_with_parent``), so no orphaned server keeps its GPU and port."""
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "from prom_reward.backends.servers import term_with_parent\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
         "                         start_new_session=True, preexec_fn=term_with_parent)\n"
         "print(child.pid, flush=True)\n"
         "time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = int(parent.stdout.readline())
    assert psutil.pid_exists(child)
    parent.kill()  # SIGKILL: no handler, no cleanup of its own
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and psutil.pid_exists(child) and psutil.Process(child).status() != "zombie":
        time.sleep(0.1)
    gone = not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert gone, "the child outlived its killed parent"
