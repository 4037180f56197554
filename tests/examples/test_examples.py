"""The GRPO and RLOO examples run end to end in --smoke mode (real TRL, real vLLM judge, CPU).

Every example test (here and tests/examples/test_examples_*dpo.py) sends its judge calls to the session's SmolLM2
vLLM server (``--judge-server``, the path of a judge on dedicated GPUs), which saves an engine start per
example; the in-process engine under TRL's trainers runs in tests/rewards/test_reward_trl.py and the README tour."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_example(module: str, tmp_path: Path, *extra: str, as_file: bool = False) -> dict:
    """``module`` run with ``--smoke`` (exit 0, no aiohttp session left open): ``python -m module``, or with
    ``as_file`` ``python rlhf_examples/X.py`` with nothing on ``PYTHONPATH`` (the example finds its checkout itself:
    ``rlhf_examples/_checkout.py``)."""
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=str(REPO))
    run = ["-m", module]
    if as_file:
        env.pop("PYTHONPATH")
        run = [str(REPO / (module.replace(".", "/") + ".py"))]
    proc = subprocess.run(
        [sys.executable, *run, "--smoke", "--output-dir", str(tmp_path), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Unclosed" not in proc.stderr, proc.stderr[-4000:]  # aiohttp: a judge session left open at exit
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SUMMARY ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    return json.loads(lines[0][len("SUMMARY ") :])


@pytest.mark.integration
@pytest.mark.smollm2
@pytest.mark.parametrize(
    "module, name", [("rlhf_examples.grpo_prometheus", "grpo"), ("rlhf_examples.rloo_prometheus", "rloo")]
)
def test_example_smoke(module, name, tmp_path, smollm2_dir, smollm2_server):
    """GRPO's runs as a file (``python rlhf_examples/grpo_prometheus.py``), RLOO's as a module."""
    out = run_example(module, tmp_path, "--judge-server", smollm2_server, as_file=name == "grpo")
    assert out["example"] == name and out["steps"] == 2 and out["finite"]
    assert len(out["rewards"]) == 2
    low, high = (1.0, 5.0) if name == "grpo" else (0.0, 1.0)  # rloo example normalises to [0, 1]
    assert all(low <= r <= high for r in out["rewards"]) and all(math.isfinite(x) for x in out["losses"])


def test_accelerate_zero3_config_loads():
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(REPO / "rlhf_examples" / "accelerate_zero3.yaml"))
    assert cfg.distributed_type == "DEEPSPEED" and cfg.num_processes == 4
    assert cfg.deepspeed_config["zero_stage"] == 3


def test_a_judge_server_keeps_the_judge_preset_and_smoke_settings():
    """--judge-server: the server owns the weights, the preset still gives the options (no server contacted)."""
    import argparse

    from rlhf_examples.common import add_common_args, make_judge

    ap = argparse.ArgumentParser()
    add_common_args(ap)
    smoke = make_judge(ap.parse_args(["--smoke", "--judge-server", "http://127.0.0.1:9/v1"]))
    assert type(smoke.backend).__name__ == "OpenAIServer" and smoke.backend.base_urls == ["http://127.0.0.1:9/v1"]
    assert smoke.force_verdict == "always" and smoke.sampling.max_tokens == 24  # SmolLM2 preset + the smoke budget
    real = make_judge(ap.parse_args(["--judge-server", "http://127.0.0.1:9/v1"]))  # prometheus-7b-v2.0 preset
    assert real.force_verdict == "cut" and real.backend.model is None and real.backend.wire.name == "chat"
