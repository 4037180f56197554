"""Shared by the job tests: a stand-in judge server that answers by content (deterministic), input rows
for each job, and the CLI arguments of each job against that server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes import FakeServer

REPO = Path(__file__).resolve().parents[2]
JOBS = ("grade", "compare", "pairs")


def _section(user: str, name: str) -> str:
    return user.split(f"###{name}:\n")[1].split("\n\n###")[0]


def _rank(response: str) -> int:
    return 2 if response.startswith("good") else 0 if response.startswith("bad") else 1


def judge_text(user: str) -> str:
    """The stand-in judge: 5 for a response starting "good", 1 for "bad", else 3; A/B: the higher of those
    (B when equal)."""
    if "###Response to evaluate:" in user:
        return "Judged. [RESULT] " + "135"[_rank(_section(user, "Response to evaluate"))]
    a, b = _section(user, "Response A"), _section(user, "Response B")
    return "Compared. [RESULT] " + ("A" if _rank(a) > _rank(b) else "B")


def chat(delay: float = 0.0):
    def reply(k: int, body: dict) -> tuple[int, Any]:
        if delay:
            time.sleep(delay)
        user = body["messages"][-1]["content"]
        text = judge_text(user)
        return 200, {
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i in range(body.get("n") or 1)
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }

    return reply


def judge_server(delay: float = 0.0) -> FakeServer:
    """A real HTTP judge on 127.0.0.1 (``/v1/chat/completions``, ``/v1/models``)."""
    return FakeServer(
        {
            "/v1/chat/completions": chat(delay),
            "/v1/models": lambda k, b: (200, {"data": [{"id": "judge", "max_model_len": 32768}]}),
        }
    )


def rows(job: str, n: int, tag: str = "") -> list[dict[str, Any]]:
    if job == "grade":
        return [
            {"id": i, "instruction": f"Q{i}{tag}?", "response": ("good " if i % 3 else "bad ") + str(i)}
            for i in range(n)
        ]
    if job == "compare":
        return [
            {
                "id": i,
                "instruction": f"Q{i}{tag}?",
                "response_a": ("good " if i % 2 else "bad ") + str(i),
                "response_b": ("bad " if i % 2 else "good ") + str(i),
            }
            for i in range(n)
        ]
    return [{"id": i, "prompt": f"Q{i}{tag}?", "completions": [f"meh {i}", f"good {i}", f"bad {i}"]} for i in range(n)]


def write(path: Path, data: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def argv(job: str, src: Path | str, out: Path | str, url: str, *extra: str) -> list[str]:
    keep = ["--keep-col", "id"] if job == "pairs" else []
    return [
        job,
        str(src),
        "-o",
        str(out),
        "--server",
        url,
        "--model",
        "judge",
        "--rubric",
        "helpfulness",
        "--batch-size",
        "4",
        "--quiet",
        "--outage-budget-s",  # a judge that fails is not waited for (the outage tests give a budget)
        "0",
        *keep,
        *extra,
    ]


def cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m prom_reward.cli ARGS`` in a child process (this tree first on the path)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "prom_reward.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
    )


def ids(path: Path) -> list[int]:
    """``source_index`` of every row of a JSON-lines output."""
    return [json.loads(line)["source_index"] for line in path.read_text().splitlines()]
