"""``prom-reward reward-server`` as a command: bad flags, files and settings exit 2 with the fix before anything
starts (no judge is asked, no port is bound), and SIGTERM or Ctrl-C stops it promptly even while a request
waits on a hung judge (``openrlhf_server.SHUTDOWN_GRACE_S``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from prom_reward.cli.main import build_parser, main
from prom_reward.cli.servers import reward_server_settings
from tests.fakes import StandInJudge, free_port

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Question: what is up?\nAnswer:"
GRACE_S = 1
"""The grace the signal tests' server waits (``SHUTDOWN_GRACE_S`` is 5): what is asserted is that the hung request is
cut when it ends, not its length."""
COMMAND = (
    "import sys\n"
    "from prom_reward.integrations import openrlhf_server\n"
    f"openrlhf_server.SHUTDOWN_GRACE_S = {GRACE_S}\n"
    "from prom_reward.cli.main import main\n"
    "sys.exit(main())\n"
)
"""``python -m prom_reward.cli`` (prom_reward/cli/__main__.py) with the grace of ``GRACE_S``."""


@pytest.mark.parametrize(
    "argv, files, words",
    [
        (["--max-body-mb", "nan"], {}, ["--max-body-mb: expected a number of megabytes > 0, got nan", "fix: "]),
        (["--max-body-mb", "-1"], {}, ["--max-body-mb", "got -1.0"]),
        (["--max-body-mb", "0"], {}, ["--max-body-mb", "got 0.0"]),
        (["--token-file", "{d}/token"], {"token": b"\xff\xfe"}, ["--token-file", "not UTF-8 text", "fix: "]),
        (["--config", "{d}/s.yaml"], {"s.yaml": b"\xff: 1\n"}, ["--config", "not UTF-8 text", "fix: "]),
        (["--request-timeout", "nan"], {}, ["--request-timeout: expected a finite number > 0, got nan"]),
        (["--batch-window-ms", "inf"], {}, ["--batch-window-ms: expected a finite number >= 0, got inf"]),
        (["--group-wait-s", "nan"], {}, ["--group-wait-s: expected a finite number >= 0, got nan"]),
        (["--token", " "], {}, ["--token: empty", "fix: "]),
        (["--server", "http://"], {}, ["--server: expected 'http(s)://host:port/v1' URLs, got 'http://'"]),
        (["--server", "http://[::1/v1"], {}, ["--server", "got 'http://[::1/v1'"]),
        (["--server", "http://127.0.0.1:99999/v1"], {}, ["--server", "got 'http://127.0.0.1:99999/v1'"]),
        (["--server", "http://judge host/v1"], {}, ["--server", "got 'http://judge host/v1'"]),
    ],
    ids=[
        "body-nan",
        "body-negative",
        "body-zero",
        "token-not-utf8",
        "config-not-utf8",
        "timeout-nan",
        "window-inf",
        "group-wait-nan",
        "token-empty",
        "url-no-host",
        "url-bad-ipv6",
        "url-port-out-of-range",
        "url-space",
    ],
)
def test_bad_flags_and_files_exit_2_naming_them_before_anything_starts(argv, files, words, tmp_path, capsys):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    judge = StandInJudge()  # never started: nothing may ask it
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    code = main(["reward-server", "--server", judge.url, "--failure-reward", "0", "--port", str(free_port()), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("prom-reward: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


def test_server_takes_comma_separated_urls_as_the_settings_table_says():
    servers = ["--server", "http://a:1/v1, http://b:2/v1", "--server", "http://c:3/v1"]
    args = build_parser().parse_args(["reward-server", *servers, "--failure-reward", "0"])
    assert reward_server_settings(args, env={}).server == ("http://a:1/v1", "http://b:2/v1", "http://c:3/v1")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_promptly_while_a_request_waits_on_a_hung_judge(sig):
    judge = StandInJudge({"good": 5}).start()
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            COMMAND,
            "reward-server",
            "--server",
            judge.url,
            "--failure-reward",
            "0",
            "--port",
            str(port),
            "--request-timeout",
            "120",
            "--outage-call-timeout-s",
            "100",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    answer: dict = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        judge.hang_first, judge.hung = judge.chats + 100, 0  # from now on every judge call hangs

        def post() -> None:
            body = {"query": [PROMPT + " good"], "prompts": [PROMPT]}
            answer["r"] = httpx.post(url + "/get_reward", json=body, timeout=150)

        client = threading.Thread(target=post)
        client.start()
        while judge.hung == 0:  # the request reached the judge
            assert time.monotonic() < deadline
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=GRACE_S + 15)
        assert time.monotonic() - sent < GRACE_S + 10
        client.join(timeout=10)
        r = answer["r"]
        assert r.status_code == 503 and "shutting down" in r.json()["error"], r.text
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        judge.stop()
