"""What the ``openai`` judge client costs: its ceiling on one core, and its overhead on a real server.

Two measurements in one run, each against a baseline of the *same* HTTP requests sent raw
(pre-built JSON bodies, the same concurrency, a bare ``aiohttp.ClientSession``; a bare
``httpx.AsyncClient`` is timed too, for the record of why the client uses aiohttp):

1. **No-op server** (``benchmarks.noop_server`` on its own core, the client pinned to
   another): judgments/s the client can push on one core, and client CPU microseconds
   per judgment, for (a) raw requests, (b) ``OpenAIServer.generate`` (the backend:
   balancing, retries, reply parsing) and (c) ``PrometheusJudge.grade`` (prompt
   rendering, the context check through ``/tokenize``, verdict parsing, bookkeeping).
2. **Real vLLM server** (``--vllm-model``: a local folder, ``tiny`` for a tiny random
   Llama, or ``smollm2``): judge throughput through ``PrometheusJudge`` vs. the same
   requests raw, judgments/s and completion tokens/s, and the ratio.

Prints a markdown table and writes a JSON record (``--json``).

Example:
    $ python -m benchmarks.client_overhead --items 2000 --vllm-model tiny --vllm-items 64 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from prom_reward import PrometheusJudge
from prom_reward.backends._openai_wire import sampling_fields
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.format.render import render_absolute
from prom_reward.format.rubrics import get_rubric
from prom_reward.format.templates import ABS_SYSTEM_PROMPT
from prom_reward.format.wire import get_wire_format

RUBRIC = "helpfulness"


def items(n: int) -> tuple[list[str], list[str]]:
    """``n`` distinct (instruction, response) pairs of realistic length (~300 words each side)."""
    filler = "The answer explains each step, gives an example, and checks the result. " * 20
    return (
        [f"Question {i}: explain how to solve problem number {i}. {filler}" for i in range(n)],
        [f"Answer {i}. {filler}" for i in range(n)],
    )


def chat_bodies(
    model: str, instructions: Sequence[str], responses: Sequence[str], sampling: SamplingConfig, system_role: bool
) -> list[dict[str, Any]]:
    """The chat-completions bodies the judge sends for these items (system prompt folded when
    the served template has no system role)."""
    wire, rubric = get_wire_format("chat"), get_rubric(RUBRIC)
    out = []
    for ins, res in zip(instructions, responses, strict=True):
        messages = wire.messages(ABS_SYSTEM_PROMPT, render_absolute(ins, res, rubric), system_role=system_role)
        out.append({"model": model, "messages": messages, **sampling_fields(sampling, 1, "chat")})
    return out


async def _raw(url: str, bodies: list[dict[str, Any]], concurrency: int) -> int:
    """POST every body to ``url/chat/completions`` with aiohttp; returns completion tokens."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 4)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=1200)) as client:

        async def one(body: dict[str, Any]) -> int:
            async with sem:
                async with client.post(url + "/chat/completions", json=body) as r:
                    r.raise_for_status()
                    data = await r.json()
                assert data["choices"][0]["message"]["content"] is not None
                return int(data.get("usage", {}).get("completion_tokens", 0))

        return sum(await asyncio.gather(*(one(b) for b in bodies)))


async def _raw_httpx(url: str, bodies: list[dict[str, Any]], concurrency: int) -> int:
    """The same with httpx."""
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=concurrency + 4)) as client:

        async def one(body: dict[str, Any]) -> int:
            async with sem:
                r = await client.post(url + "/chat/completions", json=body)
                r.raise_for_status()
                data = r.json()
                assert data["choices"][0]["message"]["content"] is not None
                return int(data.get("usage", {}).get("completion_tokens", 0))

        return sum(await asyncio.gather(*(one(b) for b in bodies)))


def timed(fn: Any) -> tuple[Any, float, float]:
    """(result, wall seconds, this process's CPU seconds)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def row(name: str, n: int, wall: float, cpu: float, tokens: int | None = None) -> dict[str, Any]:
    return {
        "path": name,
        "judgments": n,
        "wall_s": round(wall, 3),
        "judgments_per_s": round(n / wall, 1),
        "client_cpu_us_per_judgment": round(1e6 * cpu / n, 1),
        **({"completion_tokens_per_s": round(tokens / wall, 1)} if tokens is not None else {}),
    }


@contextmanager
def noop_server(cpu: int | None) -> Iterator[str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "benchmarks.noop_server", "--port", str(port)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the no-op server did not start")
        yield base + "/v1"
    finally:
        proc.terminate()
        proc.wait(10)


def bench_noop(
    n: int, concurrency: int, cpus: tuple[int, int] | None, with_httpx: bool = False, repeat: int = 5
) -> list[dict[str, Any]]:
    """The three client paths against the no-op server, ``repeat`` rounds (each round every path once, in turn,
    after one warm-up round): the median round of each path, so one noisy moment or the first batch's fresh
    memory does not decide the ratio, and each path's client CPU over the baseline's in the same round (the
    median of those paired ratios: a load that drifts across rounds moves both sides of each)."""
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpus[0]})
    ins, res = items(n)
    sampling = SamplingConfig()  # the paper defaults, as the judge sends them
    with noop_server(cpus[1] if cpus else None) as url:
        bodies = chat_bodies("noop-judge", ins, res, sampling, system_role=False)
        judge = PrometheusJudge(
            backend="openai", base_url=url, model="noop-judge", system_role=False, max_concurrency=concurrency
        )
        backend = judge.backend
        reqs = [
            GenerationRequest(ABS_SYSTEM_PROMPT, render_absolute(i, r, get_rubric(RUBRIC)), sampling=sampling)
            for i, r in zip(ins, res, strict=True)
        ]

        def check(grades: list[Any]) -> None:
            assert all(g.score == 4.0 for g in grades), "the no-op judge output did not parse"

        paths: list[tuple[str, Any]] = [
            ("raw aiohttp (same bodies): baseline", lambda: asyncio.run(_raw(url, bodies, concurrency))),
            ("OpenAIServer.generate", lambda: backend.generate(reqs)),
            ("PrometheusJudge.grade (render, context check, parse)", lambda: check(judge.grade(ins, res, RUBRIC))),
        ]
        if with_httpx:
            paths.insert(
                1, ("raw httpx (same bodies), for reference", lambda: asyncio.run(_raw_httpx(url, bodies, concurrency)))
            )
        times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in paths}
        for round_ in range(repeat + 1):  # round 0: warm-up, not counted
            for name, fn in paths:
                _, w, c = timed(fn)
                if round_:
                    times[name].append((c, w))
        judge.close()
    rows, base = [], times[paths[0][0]]
    for name, got in times.items():
        c, w = sorted(got)[len(got) // 2]  # the median round by CPU time
        paired = sorted(mine[0] / raw[0] for mine, raw in zip(got, base, strict=True))
        rows.append({**row(name, n, w, c), "cpu_over_raw_paired": round(paired[len(paired) // 2], 3)})
    return rows


def bench_vllm(model_dir: str, n: int, concurrency: int, max_tokens: int) -> list[dict[str, Any]]:
    """Judge throughput on a real vLLM server: through PrometheusJudge vs. the same requests raw."""
    import socket

    from prom_reward.backends.servers import JudgeServers, ServeConfig
    from prom_reward.backends.vllm_options import VLLMOptions

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ins, res = items(n)
    sampling = SamplingConfig(max_tokens=max_tokens)
    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeServers(
            ServeConfig(
                model=model_dir,
                port=port,
                engine=VLLMOptions(max_model_len=4096, enforce_eager=True),
                log_dir=tmp,
                startup_timeout=600,
            )
        ) as urls,
    ):
        url = urls[0]
        # max_retries=0: one request per item, as in the raw path (an untrained model's unparseable
        # outputs would otherwise be re-sampled, which is judge work, not client overhead)
        judge = PrometheusJudge(
            backend="openai",
            base_url=url,
            sampling={"max_tokens": max_tokens},
            max_concurrency=concurrency,
            timeout=1200,
            max_retries=0,
        )
        judge.grade(ins[:4], res[:4], RUBRIC)  # warm up; resolves model id and system role
        assert judge.backend.model is not None and judge.backend.system_role is not None
        bodies = chat_bodies(judge.backend.model, ins, res, sampling, judge.backend.system_role)
        tokens, w, c = timed(lambda: asyncio.run(_raw(url, bodies, concurrency)))
        rows = [row("raw aiohttp (same bodies): baseline", n, w, c, tokens)]
        before = judge.stats.completion_tokens, judge.stats.samples
        _, w, c = timed(lambda: judge.grade(ins, res, RUBRIC))
        assert judge.stats.samples - before[1] == n, "the judge sent more than one request per item"
        rows.append(row("PrometheusJudge.grade", n, w, c, judge.stats.completion_tokens - before[0]))
        judge.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="prom_reward openai-client overhead benchmark")
    p.add_argument("--items", type=int, default=2000, help="judgments against the no-op server")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--repeat", type=int, default=5, help="rounds against the no-op server (the median is reported)")
    p.add_argument("--no-pin", action="store_true", help="do not pin client and no-op server to cores 0 and 1")
    p.add_argument("--with-httpx", action="store_true", help="also time the same requests sent with httpx")
    p.add_argument("--vllm-model", help="local model folder, 'tiny' or 'smollm2' (omit to skip the vLLM part)")
    p.add_argument("--vllm-items", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32, help="judge max_tokens on the vLLM server")
    p.add_argument("--json", help="write the record here")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    pin = None if args.no_pin or (os.cpu_count() or 1) < 2 else (0, 1)
    record: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "pinned": pin,
        },
        "noop": bench_noop(args.items, args.concurrency, pin, args.with_httpx, args.repeat),
    }
    record["noop_ratio_judge_over_raw"] = round(
        record["noop"][-1]["judgments_per_s"] / record["noop"][0]["judgments_per_s"], 3
    )
    cpu = [r["client_cpu_us_per_judgment"] for r in record["noop"]]
    record["noop_cpu_ratio_judge_over_raw"] = round(cpu[-1] / cpu[0], 3)  # the target: at most 1.5
    record["noop_cpu_ratio_paired"] = record["noop"][-1]["cpu_over_raw_paired"]
    print(
        "## Against a no-op server\n\n"
        + table(record["noop"])
        + f"\n\nratio (judge / raw judgments/s): {record['noop_ratio_judge_over_raw']}"
        + f"\nclient CPU per judgment, judge / raw: {record['noop_cpu_ratio_judge_over_raw']} (median rounds), "
        + f"{record['noop_cpu_ratio_paired']} (median of the rounds' own ratios)\n"
    )
    if args.vllm_model:
        if pin and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        model = args.vllm_model
        if model in ("tiny", "smollm2"):
            from benchmarks.tiny_llama import build_tiny_llama
            from prom_reward.local.models import ensure_smollm2

            smol = ensure_smollm2()
            model = str(smol if model == "smollm2" else build_tiny_llama(Path(tempfile.mkdtemp()), tokenizer_from=smol))
        record["vllm"] = {
            "model": args.vllm_model,
            "max_tokens": args.max_tokens,
            "rows": bench_vllm(model, args.vllm_items, args.concurrency, args.max_tokens),
        }
        r = record["vllm"]["rows"]
        record["vllm"]["ratio_judge_over_raw"] = round(r[1]["judgments_per_s"] / r[0]["judgments_per_s"], 3)
        print(
            f"## Through a real vLLM server ({args.vllm_model}, max_tokens {args.max_tokens})\n\n"
            + table(r)
            + f"\n\nratio (judge / raw judgments/s): {record['vllm']['ratio_judge_over_raw']}\n"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
