"""``prom-reward serve`` / JudgeServers: real vLLM servers as subprocesses on CPU."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from prom_reward import ConfigError
from prom_reward.backends.servers import JudgeServers, ServeConfig, _answers_health, check_port_free, listens
from prom_reward.backends.vllm_options import VLLMOptions
from tests.fakes import FakeServer, free_port


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
    "argv, fmt, warning",
    [
        (["--model", "some/model"], "prometheus2", None),
        (["--model", "m-prometheus-7b"], "m-prometheus", None),  # the preset's
        (["--model", "some/model", "--format", "flow-judge"], "flow-judge", None),
        (["--model", "prometheus-7b-v2.0", "--format", "Selene"], "selene", "trained on the prometheus2 format"),
    ],
)
def test_serve_names_the_format_its_clients_prompt_in(argv, fmt, warning, capsys):
    from prom_reward.cli.main import build_parser
    from prom_reward.cli.servers import serve_format

    assert serve_format(build_parser().parse_args(["serve", *argv])) == fmt
    err = capsys.readouterr().err
    assert (warning in err and "fix: give --format prometheus2" in err) if warning else err == ""


def test_serve_refuses_an_unknown_format_before_starting_anything(capsys):
    from prom_reward.cli.main import main

    with pytest.raises(SystemExit) as bad:
        main(["serve", "--model", "some/model", "--format", "prometheus3"])
    err = capsys.readouterr().err
    assert (
        bad.value.code == 2
        and "unknown judge format 'prometheus3'; valid names: " in err
        and "judge servers" not in err
    )


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            {"gpus": (4, 5, 6), "engine": VLLMOptions(tensor_parallel_size=2)},
            "gpus: 3 GPUs .* groups of tensor_parallel_size 2",
        ),
        ({"gpus": (4, 4)}, "twice"),
        ({"gpus": (4, 5), "replicas": 3}, r"replicas: expected 1\.\.2 .* got 3"),
        ({"engine": {"gpu_memory_utilization": 0.5}}, "engine: expected a VLLMOptions"),
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
    proc = _serve(
        tmp_path, port, tmp_path / "logs", stderr=None, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
    )
    try:
        line = proc.stdout.readline()
        assert f"judge servers ready: http://127.0.0.1:{port}/v1" in line, line
        _logs, use = proc.stdout.readline(), proc.stdout.readline()
        assert use.startswith(f"use: --server http://127.0.0.1:{port}/v1 --format prometheus2 "), use
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        time.sleep(0.5)  # serve is in its watch loop (its signal handlers are set before it says ready)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert "judge servers stopped" in proc.stdout.read()
        with pytest.raises(httpx.HTTPError):  # its server's process group was stopped with it
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        (log,) = (tmp_path / "logs").glob(f"judge-{port}-*.log")  # the server's output: its own file in --log-dir
        assert "GET /health" in log.read_text()
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


def _serve(tmp_path: Path, port: int, logs: Path, **popen: Any) -> subprocess.Popen[str]:
    """``prom-reward serve`` with the stand-in server command (FAKE_SERVE), its output piped (``popen``: other
    ``subprocess.Popen`` options, or other pipes)."""
    return subprocess.Popen(
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
            str(logs),
        ],
        **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen},
    )


def test_a_second_serve_on_a_taken_port_fails_before_starting_anything(tmp_path):
    """The port is checked before any engine starts: exit 2 naming the port, no 'ready', no log touched."""
    (tmp_path / "health").write_text("ok")
    logs = tmp_path / "logs"
    first = _serve(tmp_path, port := free_port(), logs)
    try:
        assert f"judge servers ready: http://127.0.0.1:{port}/v1" in first.stdout.readline()
        (log,) = logs.glob(f"judge-{port}-*.log")
        before = log.read_bytes()
        start = time.monotonic()
        second = _serve(tmp_path, port, logs)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 2 and time.monotonic() - start < 30
        assert "ready" not in out and f"port {port} on 127.0.0.1 is already in use" in err and "--port" in err, err
        assert list(logs.glob("*.log")) == [log] and log.read_bytes()[: len(before)] == before
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)


def test_two_serves_from_one_folder_keep_their_own_logs(tmp_path):
    (tmp_path / "health").write_text("ok")
    logs, ports = tmp_path / "logs", (free_port(), free_port())
    procs = [_serve(tmp_path, port, logs) for port in ports]
    try:
        for proc, port in zip(procs, ports, strict=True):
            assert f"judge servers ready: http://127.0.0.1:{port}/v1" in proc.stdout.readline()
            named = proc.stdout.readline()
            (log,) = logs.glob(f"judge-{port}-*.log")
            assert named.strip() == f"logs: {log}"
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert len(list(logs.glob("judge-*.log"))) == 2
    for port in ports:  # each log holds its own server's requests only
        (log,) = logs.glob(f"judge-{port}-*.log")
        assert "GET /health" in log.read_text()


def test_ready_means_this_process_listens_not_whatever_answers_on_the_port(tmp_path):
    """``listens``: a server in its own session owns its port; another session's process does not."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while listens(server.pid, port) is not True and time.monotonic() < deadline:
            time.sleep(0.2)
        assert listens(server.pid, port) is True
        assert listens(bystander.pid, port) is False and listens(server.pid, free_port()) is False
        with pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is already in use"):
            check_port_free("127.0.0.1", port)
    finally:
        for proc in (server, bystander):
            proc.kill()
            proc.wait()


def test_the_health_poll_is_ready_only_on_a_200():
    """The launcher's poll of its own servers (stdlib, no proxy): 200 is ready; 503 (loading), 404 and nothing
    listening are not, and none of them raises."""
    server = FakeServer({"/health": lambda n, b: (503 if n == 1 else 200, {})})
    root = server.url.removesuffix("/v1")
    try:
        assert _answers_health(root + "/health") is False  # still loading
        assert _answers_health(root + "/health") is True
        assert _answers_health(root + "/nothing") is False
    finally:
        server.stop()
    assert _answers_health(f"http://127.0.0.1:{free_port()}/health") is False
