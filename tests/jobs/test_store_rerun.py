"""A ``--store`` re-run through the real CLI and the real in-process vLLM engine (SmolLM2): the first run
generates and stores; a re-run into a new output with the same store is answered by the store alone: it
starts no engine, reports its judgments and tokens as stored (none generated) and writes the same rows.

Both runs go as a user runs them (progress bars on): vLLM logs to stdout, so while a job runs fd 1 is
stderr, and the whole of stdout is the one-line summary (``prom-reward grade ... | jq .`` reads it); the
first run, the suite's one job on an in-process engine in a child process, checks that too."""

from __future__ import annotations

import json
import os
import time

import pytest

from prom_reward.jobs.source import read_rows
from tests.jobs.helpers import REPO, cli, write

pytestmark = [pytest.mark.integration, pytest.mark.smollm2]

ENGINE_START = "Initializing a V1 LLM engine"
"""vLLM's log line when ``vllm.LLM`` starts its engine."""
RESULTS = ("score", "feedback", "judge_failures", "judge_retries", "forced_verdicts", "judge_error")


def test_a_rerun_answered_by_the_store_starts_no_engine(tmp_path, smollm2_dir):
    src = write(
        tmp_path / "in.jsonl", [{"instruction": f"What is {i} + {i}?", "response": str(2 * i)} for i in range(3)]
    )
    store = tmp_path / "judgments.sqlite"
    blocked = tmp_path / "no-vllm" / "vllm"  # on the re-run's path first: importing vLLM there fails the run
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text('raise ImportError("vLLM imported by a run the store answers")\n')

    def grade(out: str, env: dict[str, str]) -> tuple[dict, str, float]:
        args = ["grade", str(src), "-o", str(tmp_path / out), "--model", str(smollm2_dir), "--rubric", "helpfulness"]
        args += ["--max-tokens", "24", "--max-model-len", "2048", "--enforce-eager", "--store", str(store)]
        start = time.perf_counter()
        done = cli(args, env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "INFO", **env}, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("\n") == 1, done.stdout[-3000:]  # the whole of stdout is the summary
        return json.loads(done.stdout), done.stderr, time.perf_counter() - start

    first, first_log, first_s = grade("a.jsonl", {})
    assert ENGINE_START in first_log, first_log[-3000:]  # vLLM's start, on stderr, when there is one
    assert first["job"] == "grade" and first["rows"] == 3
    assert first["samples"] >= 3 and first["completion_tokens"] > 0 and first["stored_samples"] == 0
    again, again_log, again_s = grade("b.jsonl", {"PYTHONPATH": os.pathsep.join((str(blocked.parent), str(REPO)))})
    assert ENGINE_START not in again_log
    assert (again["samples"], again["prompt_tokens"], again["completion_tokens"]) == (0, 0, 0)  # nothing generated
    stored = (again["stored_samples"], again["stored_prompt_tokens"], again["stored_completion_tokens"])
    assert stored == (first["samples"], first["prompt_tokens"], first["completion_tokens"])
    assert again["parse_failures"] == first["parse_failures"] and again["forced"] == first["forced"]
    a, b = list(read_rows(tmp_path / "a.jsonl")), list(read_rows(tmp_path / "b.jsonl"))
    assert [{k: r[k] for k in RESULTS} for r in a] == [{k: r[k] for k in RESULTS} for r in b] and len(a) == 3
    assert again_s < first_s / 2, (first_s, again_s)  # the engine's start-up is what the first run spent
