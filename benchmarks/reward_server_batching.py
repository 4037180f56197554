"""What the OpenRLHF reward server costs: 64 single-sample clients vs. one direct batched call.

OpenRLHF 0.11.2 posts one sample per HTTP request. The reward server must gather concurrent
requests into batched judge calls, or the judge sees batches of one. This benchmark measures,
in one run and on the same judge server (a real vLLM OpenAI server started here):

- **direct**: ``PrometheusJudge.grade`` on all ``--items`` samples in one call (the judge's
  own client batching: the best the judge server can do);
- **reward server**: ``prom-reward reward-server --server URL`` started as a subprocess, and
  ``--items`` concurrent clients, each one OpenRLHF's own ``SingleTurnAgentExecutor
  ._fetch_rewards_via_http([query], [prompt], [label])`` (one sample per request, OpenRLHF's
  aiohttp session and timeout), all at once.

It reports samples/s of each, the ratio (goal >= 0.8), and the judge batch sizes the server
formed (from its ``GET /stats``). Runs alternate between the paths (``--repeat``).

Example:
    $ python -m benchmarks.reward_server_batching --model tiny --items 64 --max-tokens 32 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.report import emit

RUBRIC = "helpfulness"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def samples(n: int) -> tuple[list[str], list[str]]:
    """``n`` distinct (prompt, response) pairs of realistic length."""
    filler = "The answer explains each step, gives an example, and checks the result. " * 8
    return (
        [f"Question {i}: explain how to solve problem number {i}." for i in range(n)],
        [f"Answer {i}. {filler}" for i in range(n)],
    )


def _resolve_model(model: str) -> str:
    if model not in ("tiny", "smollm2"):
        return model
    from benchmarks.tiny_llama import build_tiny_llama
    from prom_reward.local.models import ensure_smollm2

    smol = ensure_smollm2()
    return str(smol if model == "smollm2" else build_tiny_llama(Path(tempfile.mkdtemp()), tokenizer_from=smol))


def start_reward_server(
    judge_url: str, port: int, max_tokens: int, log: Path, extra: Sequence[str] = ()
) -> subprocess.Popen:
    """``prom-reward reward-server`` on 127.0.0.1:port in front of ``judge_url``; waits for /health."""
    cmd = [
        sys.executable,
        "-m",
        "prom_reward.cli",
        "reward-server",
        "--server",
        judge_url,
        "--port",
        str(port),
        "--rubric",
        RUBRIC,
        "--max-tokens",
        str(max_tokens),
        "--force-verdict",
        "always",
        "--failure-reward",
        "min",
        *extra,
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"reward server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"reward server did not come up; log {log}")


async def openrlhf_clients(url: str, prompts: list[str], responses: list[str]) -> list[float]:
    """Every sample through OpenRLHF's own client function, one sample per request, all at once."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(url)
    calls = [executor._fetch_rewards_via_http([p + r], [p], [None]) for p, r in zip(prompts, responses, strict=True)]
    results = await asyncio.gather(*calls)
    return [res[0]["rewards"][0] for res in results]


def measure(
    judge_url: str, items: int, max_tokens: int, repeat: int, window_ms: float, log_dir: str | Path
) -> dict[str, Any]:
    """Both paths on the judge server at ``judge_url`` (``.../v1``); returns the record."""
    from prom_reward import PrometheusJudge

    prompts, responses = samples(items)
    record: dict[str, Any] = {
        "benchmark": "reward_server_batching",
        "items": items,
        "max_tokens": max_tokens,
        "repeat": repeat,
        "window_ms": window_ms,
        "cpus": os.cpu_count(),
        "runs": [],
    }
    judge = PrometheusJudge(
        backend="openai",
        base_url=judge_url,
        sampling={"max_tokens": max_tokens},
        force_verdict="always",
        max_concurrency=max(items, 64),
        timeout=1200,
    )
    port = _port()
    server = start_reward_server(
        judge_url,
        port,
        max_tokens,
        Path(log_dir) / "reward_server.log",
        ["--batch-window-ms", str(window_ms), "--max-batch-size", str(max(items, 1))],
    )
    url = f"http://127.0.0.1:{port}/get_reward"
    try:
        judge.grade(prompts[:4], responses[:4], RUBRIC)  # warm-up: model id, template, server caches
        asyncio.run(openrlhf_clients(url, prompts[:4], responses[:4]))
        warm = len(httpx.get(f"http://127.0.0.1:{port}/stats", timeout=10).json()["batcher"]["recent_batch_sizes"])
        for _ in range(repeat):
            t = time.perf_counter()
            grades = judge.grade(prompts, responses, RUBRIC)
            direct = time.perf_counter() - t
            t = time.perf_counter()
            rewards = asyncio.run(openrlhf_clients(url, prompts, responses))
            served = time.perf_counter() - t
            record["runs"].append(
                {
                    "direct_s": direct,
                    "server_s": served,
                    "direct_per_s": items / direct,
                    "server_per_s": items / served,
                    "ratio": direct / served,
                    "direct_failures": sum(g.score is None for g in grades),
                    "server_rewards": len(rewards),
                }
            )
        stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=10).json()
    finally:
        server.terminate()
        server.wait(timeout=30)
        judge.close()
    record["server_stats"] = stats
    ratios = sorted(r["ratio"] for r in record["runs"])
    record["ratio_median"] = ratios[len(ratios) // 2]
    record["judge_batch_sizes"] = stats["batcher"]["recent_batch_sizes"][warm:]  # the timed runs only
    return record


def run(model: str, items: int, max_tokens: int, repeat: int, window_ms: float) -> dict[str, Any]:
    """``measure`` on a vLLM judge server started here for ``model``."""
    from prom_reward.backends.servers import JudgeServers, ServeConfig
    from prom_reward.backends.vllm_options import VLLMOptions

    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeServers(
            ServeConfig(
                model=_resolve_model(model),
                port=_port(),
                engine=VLLMOptions(max_model_len=4096, enforce_eager=True),
                log_dir=tmp,
                startup_timeout=600,
            )
        ) as urls,
    ):
        return {"model": model, **measure(urls[0], items, max_tokens, repeat, window_ms, tmp)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny", help="judge model: a local folder, 'tiny' or 'smollm2'")
    p.add_argument("--items", type=int, default=64, help="concurrent single-sample clients (= samples)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--window-ms", type=float, default=20.0, help="the reward server's batch window")
    p.add_argument("--json", help="write the record here too")
    args = p.parse_args(argv)
    rec = run(args.model, args.items, args.max_tokens, args.repeat, args.window_ms)
    emit(rec, args.json)
    print(
        f"\nreward server / direct: {rec['ratio_median']:.2f} (median of {args.repeat}); judge batch sizes "
        f"{rec['judge_batch_sizes']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
