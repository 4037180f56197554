"""SE-Cali on scripted backends: the base model reads each valid output by teacher forcing and sets its
``base_entropy``; a base model must declare teacher forcing; a vLLM judge and a vLLM base model split the GPU
(no vLLM started: the engines' options are checked). Real engines: ``test_calibration_engines.py``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from prom_reward import ConfigError, PrometheusJudge
from prom_reward.backends.base import Completion, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.experimental import BaseModelReader, calibrated_judge
from tests.judges import Calibrator

LN = math.log


def completion(text: str, token: str, probs: dict[str, float]) -> Completion:
    """A one-token scripted output with the distribution ``probs`` at that token."""
    return Completion(text, (TokenLogprobs(token, LN(probs[token]), {k: LN(v) for k, v in probs.items()}),), "stop", 1)


def test_calibration_sets_base_entropy_and_se_cali():
    base = Calibrator({"t": 0.5, "u": 0.5})
    out = completion("Fine. [RESULT] 4", "4", {"4": 1.0})
    judge = calibrated_judge(backend=ScriptedBackend(outputs=[out, "no verdict"]), base=base, max_retries=0)
    assert judge.capabilities.confidence and judge.sampling.logprobs == 20
    g, bad = judge.grade(["q", "q2"], ["r", "r2"], "helpfulness")
    ((requests, texts, k),) = base.calls
    assert texts == ["Fine. [RESULT] 4"] and k == 20  # only the valid sample is read
    assert "###Response to evaluate:\nr\n" in requests[0].user
    assert g.confidence.base_entropy == pytest.approx(LN(2)) and g.confidence.entropy == 0.0
    assert g.confidence.entropy_calibrated == pytest.approx(-LN(2))
    (reader,) = judge.readers
    assert bad.confidence.base_entropy is None and isinstance(reader, BaseModelReader) and reader.tokens == 3


def test_a_judge_without_a_reader_has_no_se_cali():
    out = completion("Fine. [RESULT] 4", "4", {"4": 1.0})
    (g,) = PrometheusJudge(backend=ScriptedBackend(outputs=[out]), confidence=True).grade(["q"], ["r"], "helpfulness")
    assert g.confidence.entropy == 0.0 and g.confidence.base_entropy is None and g.confidence.entropy_calibrated is None


class Forcing(ScriptedBackend):
    """A scripted backend that declares teacher forcing."""

    capabilities = dataclasses.replace(ScriptedBackend.capabilities, continuation_logprobs=True)

    async def acontinuation_logprobs(self, requests, continuations, top_k=20, deadline=None):
        return [() for _ in continuations]


@pytest.mark.parametrize(
    "base, error",
    [
        (ScriptedBackend(outputs=["y"]), "does not declare capabilities.continuation_logprobs"),  # undeclared
        (object(), "does not declare capabilities.continuation_logprobs"),  # not a backend
        (Forcing(outputs=[]), None),
    ],
    ids=["undeclared", "not_a_backend", "declared"],
)
def test_a_base_model_must_declare_teacher_forcing(base, error):
    if error is not None:
        with pytest.raises(ConfigError, match=error):
            calibrated_judge(backend="scripted", outputs=["x"], base=base)
        return
    judge = calibrated_judge(backend="scripted", outputs=["x"], base=base)
    assert judge.capabilities.confidence and [r.scorer for r in judge.readers] == [base]


def test_a_reader_checks_its_truncation_and_closes_only_what_it_built(monkeypatch):
    with pytest.raises(ConfigError, match="truncation: expected one of"):
        BaseModelReader(Forcing(outputs=[]), truncation="drop")
    closed = []

    class Closing(Forcing):
        def close(self):
            closed.append(self)

    given = Closing(outputs=[])
    calibrated_judge(backend="scripted", outputs=["x"], base=given).close()
    assert closed == []  # a base model given built stays the caller's
    from prom_reward.experimental import calibration as calibration_module

    monkeypatch.setattr(calibration_module, "make_backend", lambda name, **options: Closing(outputs=[]))
    calibrated_judge(backend="scripted", outputs=["x"], base={"backend": "closing"}).close()
    assert len(closed) == 1  # one built from options is closed with the judge


# ---- a vLLM judge and a vLLM base model share one GPU ---------------------------------------------------


class _Engine(ScriptedBackend):
    """Stands in for a VLLMEngine the caller built (the judge reads only its declared ``gpu_memory_share`` and
    the teacher-forcing method); the real engine is never started here."""

    name = "vllm"
    capabilities = VLLMEngine.capabilities

    def __init__(self, share: float) -> None:
        super().__init__(outputs=[])
        self.gpu_memory_share = share

    async def acontinuation_logprobs(self, requests, continuations, top_k=20, deadline=None):
        return [() for _ in requests]


def _built(monkeypatch):
    """The options each vLLM engine of a calibrated judge would be started with."""
    from prom_reward.core import judge as judge_module
    from prom_reward.experimental import calibration as calibration_module

    built = []

    def make_backend(name, **options):
        built.append((name, options))
        return _Engine(options.get("gpu_memory_utilization", 0.9))

    monkeypatch.setattr(judge_module, "make_backend", make_backend)  # the judge's engine
    monkeypatch.setattr(calibration_module, "make_backend", make_backend)  # a calibration engine from a dict
    return built


@pytest.mark.parametrize(
    "judge_share, calibration, expected",
    [
        (None, {"model": "base"}, [("vllm", 0.45), ("vllm", 0.45)]),  # calibration first, then the judge
        (0.6, {"backend": "vllm", "model": "base"}, [("vllm", 0.3), ("vllm", 0.6)]),
        (None, {"model": "base", "gpu_memory_utilization": 0.2}, [("vllm", 0.2), ("vllm", 0.7)]),
        (None, {"backend": "transformers", "model": "base"}, [("transformers", None), ("vllm", None)]),
    ],
)
def test_a_judge_and_its_calibration_engine_split_the_gpu(monkeypatch, judge_share, calibration, expected):
    built = _built(monkeypatch)
    options = {} if judge_share is None else {"gpu_memory_utilization": judge_share}
    calibrated_judge("judge", backend="vllm", base=calibration, **options)
    assert [(name, opts.get("gpu_memory_utilization")) for name, opts in built] == expected


def test_a_ready_calibration_engine_leaves_the_judge_the_rest(monkeypatch):
    built = _built(monkeypatch)
    calibrated_judge("judge", backend="vllm", base=_Engine(0.45))
    assert built == [("vllm", {"model": "judge", "gpu_memory_utilization": 0.45})]
    with pytest.raises(ConfigError, match="leaves nothing"):  # vLLM's own default share: no room for the judge
        calibrated_judge("judge", backend="vllm", base=_Engine(0.9))
