"""The judge-to-DPO example runs end to end in --smoke mode (real policy sampling, real vLLM judge, TRL DPO, CPU)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def tagged(stdout: str, tag: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(tag + " ")]
    assert len(lines) == 1, stdout[-3000:]
    return json.loads(lines[0][len(tag) + 1 :])


def run_example(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "rlhf_examples.dpo_from_judge", "--smoke", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.mark.integration
@pytest.mark.smollm2
@pytest.mark.slow  # second end-to-end run: tests/preferences/test_preferences.py
def test_dpo_from_judge_example_smoke(tmp_path, smollm2_dir, smollm2_server, capsys):
    # the judge is the session's SmolLM2 server (--judge-server), as in tests/examples/test_examples.py
    proc = run_example("--output-dir", str(tmp_path), "--judge-server", smollm2_server)
    pairs = tagged(proc.stdout, "PAIRS")
    assert pairs["rows"] == 8 and pairs["n_pairs"] > 0 and pairs["forced_verdicts"] > 0
    # best_vs_worst: one candidate per prompt, a pair, a judge failure or a skip
    assert pairs["n_pairs"] + pairs["failed"] + sum(pairs["skipped"].values()) == 8
    out = tagged(proc.stdout, "SUMMARY")
    assert out["example"] == "dpo_from_judge" and out["steps"] == 2 and out["finite"]
    assert len(out["losses"]) == 2 and all(math.isfinite(x) for x in out["losses"])
    assert len(out["rewards"]) == 2  # rewards/margins logged by the DPO trainer

    rows = [json.loads(x) for x in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert len(rows) == pairs["n_pairs"]
    for r in rows:  # conversational rows, chosen/rejected from the sampled completions of the same prompt
        assert r["prompt"][0]["role"] == "user" and r["chosen"][0]["role"] == "assistant"
        assert r["score_chosen"] > r["score_rejected"] and r["chosen_index"] != r["rejected_index"]
    manifest = json.loads((tmp_path / "pairs.jsonl.parts" / "_manifest.json").read_text())
    assert manifest["job"] == "pairs" and manifest["inputs"][0]["rows"] == 8  # resumable, bound to its input

    # stage 3 alone, as on a GPU node after the pairs were made elsewhere (in this process: TRL is imported)
    from rlhf_examples.dpo_from_judge import main

    capsys.readouterr()
    again = main(["--smoke", "--pairs", str(tmp_path / "pairs.jsonl"), "--output-dir", str(tmp_path / "train-only")])
    printed = capsys.readouterr().out
    assert "PAIRS " not in printed and tagged(printed, "SUMMARY")["steps"] == again["steps"] == 2
    assert again["n_pairs"] == pairs["n_pairs"] and again["finite"]
