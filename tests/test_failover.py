"""Faults that must be survived: a judge server killed with SIGKILL in the middle of a 1,000-item job."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import httpx
import pytest

from prom_reward import PrometheusJudge
from prom_reward.serve import JudgeServers, ServeConfig

pytestmark = pytest.mark.integration

N_ITEMS = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kill_one_of_two_servers_mid_job_loses_and_duplicates_nothing(tiny_model_dir, vllm_server, tmp_path):
    """Two real vLLM servers on the tiny model: the session's, and one started here with ``JudgeServers``
    (the library form of ``prom-reward serve``), which is SIGKILLed 3 s into a 1,000-item job."""
    cfg = ServeConfig(model=str(tiny_model_dir), port=free_port(), max_model_len=2048, enforce_eager=True,
                      log_dir=str(tmp_path / "logs"), startup_timeout=600)
    servers = JudgeServers(cfg)
    try:
        urls = [vllm_server, *servers.start()]
        judge = PrometheusJudge(backend="openai", base_url=urls, sampling={"max_tokens": 2}, max_retries=0,
                                max_concurrency=32, timeout=60.0, backoff=0.2)
        victim = servers.procs[0]
        killed = threading.Event()

        def kill_soon() -> None:
            time.sleep(3.0)  # the job is under way on both servers by then
            os.killpg(victim.pid, signal.SIGKILL)
            killed.set()

        threading.Thread(target=kill_soon, daemon=True).start()
        start = time.monotonic()
        grades = judge.grade([f"Question {i}?" for i in range(N_ITEMS)], [f"Answer {i}." for i in range(N_ITEMS)],
                             "helpfulness")
        elapsed = time.monotonic() - start
        assert killed.is_set() and victim.poll() is not None, f"job finished in {elapsed:.1f}s, before the kill"
        assert len(grades) == N_ITEMS
        # exactly one judged sample per item: nothing lost, nothing judged twice into the result
        assert all(len(g.samples) == 1 for g in grades)
        assert judge.stats.samples == N_ITEMS
        assert (tmp_path / "logs" / "judge-0.log").stat().st_size > 0  # the server's output: JudgeServers' log_dir
    finally:
        servers.stop(grace=10)
    assert all(p.poll() is not None for p in servers.procs)
    with pytest.raises(httpx.HTTPError):
        httpx.get(urls[1][:-3] + "/health", timeout=2)
