"""The sampling loop's force policy (``never`` / ``cut`` / ``always``), exactly, on the scripted backend.

The real engine runs the default policy in tests/backends/test_vllm_engine.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from prom_reward import ConfigError, PrometheusJudge
from prom_reward.backends.base import Completion, GenerationRequest, TokenLogprobs
from prom_reward.backends.bridge import run_sync
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.results import JudgeSample
from prom_reward.core.sampler import (
    FORCE_POLICIES,
    ItemRun,
    SampleRunner,
    check_force_policy,
    forced_text,
    should_force,
)
from prom_reward.format.formats.prometheus2 import PROMETHEUS2

CUT_TEXT = "The response is accurate but the explanation of the second step"


def sampled(runner: SampleRunner, *args: Any) -> list[ItemRun]:
    """``runner.run(*args)``, waited for."""
    return run_sync(lambda: runner.run(*args))


def sample(text: str, finish: str | None, verdict: int | None = None) -> JudgeSample:
    return JudgeSample(text=text, feedback=None, verdict=verdict, finish_reason=finish)


@pytest.mark.parametrize(
    ("text", "finish", "verdict", "expected"),
    [
        # text, finish reason, parsed verdict -> forced under (never, cut, always)
        (CUT_TEXT, "length", None, (False, True, True)),
        (CUT_TEXT, "stop", None, (False, False, True)),
        (CUT_TEXT, None, None, (False, False, True)),  # a backend that reports no finish reason
        (CUT_TEXT, "abort", None, (False, False, True)),
        ("Good. [RESULT]", "length", None, (False, True, True)),  # an open marker
        ("Good. [RESU", "length", None, (False, True, True)),  # cut inside the marker
        ("Good. [RESULT] 4", "length", 4, (False, False, False)),  # a verdict: nothing to force
        ("Good. [RESULT] 7", "length", None, (False, False, False)),  # a bad verdict: re-sampled, not forced
        ("Good. [RESULT] 7", "stop", None, (False, False, False)),
    ],
)
def test_should_force_table(text: str, finish: str | None, verdict: int | None, expected: tuple[bool, ...]) -> None:
    s = sample(text, finish, verdict)
    assert tuple(should_force(s, p, PROMETHEUS2) for p in ("never", "cut", "always")) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "prefix"),
    [
        (CUT_TEXT, CUT_TEXT + " [RESULT] "),
        ("Good. [RESULT]", "Good. [RESULT] "),
        ("Good. [RESULT]:", "Good. [RESULT] "),
        ("Good. [RESU", "Good. [RESULT] "),
        ("Good. [r", "Good. [RESULT] "),
        ("Good. [", "Good. [RESULT] "),
        ("See [1] and [2]", "See [1] and [2] [RESULT] "),
    ],
)
def test_force_prefix_drops_a_marker_cut_short(text: str, prefix: str) -> None:
    assert forced_text(PROMETHEUS2, text) == prefix


def forcing_backend(first: str, finish: str, verdict_top: dict[str, float] | None = None) -> ScriptedBackend:
    """Every sample is ``first`` (finish reason ``finish``); a forcing request reads ``verdict_top``."""
    top = {k: math.log(v) for k, v in (verdict_top or {"4": 0.8, "3": 0.2}).items()}

    def respond(req: GenerationRequest, i: int) -> Completion:
        if req.assistant_prefix:
            assert req.assistant_prefix.endswith(" [RESULT] ") and req.sampling.max_tokens == 3
            tok = max(top, key=lambda k: top[k])
            return Completion(tok, (TokenLogprobs(tok, top[tok], top),), "length", 1)
        return Completion(first, None, finish, 12)

    return ScriptedBackend(respond=respond)


def test_cut_output_is_forced_at_once_not_resampled() -> None:
    backend = forcing_backend(CUT_TEXT, "length")
    (run,) = sampled(SampleRunner(backend, max_retries=2), [GenerationRequest("s", "u")], "absolute")
    assert [s.verdict for s in run.samples] == [4] and run.samples[0].forced and run.retries == 0
    assert run.samples[0].probabilities == pytest.approx({"4": 0.8, "3": 0.2})
    assert run.samples[0].feedback == CUT_TEXT and run.samples[0].completion_tokens == 13  # 12 + the forced one
    assert len(backend.calls) == 2 and backend.calls[1][0].assistant_prefix == CUT_TEXT + " [RESULT] "


def test_cut_output_under_never_is_resampled_until_retries_run_out() -> None:
    backend = forcing_backend(CUT_TEXT, "length")
    runner = SampleRunner(backend, max_retries=2, force_verdict="never")
    (run,) = sampled(runner, [GenerationRequest("s", "u")], "absolute")
    assert run.valid == [] and run.failures == 3 and run.retries == 2 and run.forced == 0
    assert not any(r.assistant_prefix for call in backend.calls for r in call)


def test_output_that_stopped_without_verdict_is_resampled_under_cut_forced_under_always() -> None:
    backend = forcing_backend("I think it is fine.", "stop")
    (run,) = sampled(SampleRunner(backend, max_retries=1), [GenerationRequest("s", "u")], "absolute")
    assert run.valid == [] and run.retries == 1 and len(backend.calls) == 2
    assert not any(r.assistant_prefix for call in backend.calls for r in call)
    backend = forcing_backend("I think it is fine.", "stop")
    runner = SampleRunner(backend, max_retries=1, force_verdict="always")
    (run,) = sampled(runner, [GenerationRequest("s", "u")], "absolute")
    assert [s.verdict for s in run.valid] == [4] and run.forced == 1 and run.retries == 0


def test_a_cut_output_whose_forcing_finds_no_verdict_is_resampled() -> None:
    backend = forcing_backend(CUT_TEXT, "length", {"the": 0.9, "a": 0.1})
    (run,) = sampled(SampleRunner(backend, max_retries=1), [GenerationRequest("s", "u")], "absolute")
    assert run.valid == [] and run.failures == 2 and run.retries == 1 and run.forced == 0
    assert [bool(r.assistant_prefix) for call in backend.calls for r in call] == [False, True, False, True]
    assert all(s.completion_tokens == 13 for s in run.samples)  # the forcing request's token is counted


def test_pairwise_cut_output_is_forced_in_a_mixed_batch() -> None:
    top = {"A": math.log(0.3), "B": math.log(0.7)}

    def respond(req: GenerationRequest, i: int) -> Completion:
        if req.assistant_prefix:
            return Completion("B", (TokenLogprobs("B", top["B"], top),), "length", 1)
        if req.user == "done":
            return Completion("A is clearer. [RESULT] A", None, "stop", 8)
        return Completion("Response A is clearer, but B", None, "length", 8)

    backend = ScriptedBackend(respond=respond)
    runs = sampled(SampleRunner(backend), [GenerationRequest("s", "done"), GenerationRequest("s", "cut")], "relative")
    assert [s.verdict for r in runs for s in r.samples] == ["A", "B"]
    assert [r.forced for r in runs] == [0, 1] and len(backend.calls) == 2 and len(backend.calls[1]) == 1


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (True, r"got True \(True is now 'always', False 'never'\)"),
        (False, r"got False \(True is now 'always', False 'never'\)"),
        ("sometimes", r"expected one of never, cut, always, got 'sometimes'"),
        (None, r"expected one of never, cut, always, got None"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_valid_ones(given: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_force_policy(given)
    with pytest.raises(ConfigError, match=message):
        SampleRunner(ScriptedBackend(outputs=[]), force_verdict=given)  # type: ignore[arg-type]
    if given is not None:  # None on the judge means "the preset's, else cut"
        with pytest.raises(ConfigError, match=message):
            PrometheusJudge(backend="scripted", outputs=[], force_verdict=given)  # type: ignore[arg-type]


def test_judge_policy_precedence() -> None:
    assert FORCE_POLICIES == ("never", "cut", "always")
    assert PrometheusJudge(backend="scripted", outputs=[]).force_verdict == "cut"  # no preset: the default
    smol = PrometheusJudge("smollm2-135m-instruct", backend="scripted", outputs=[])
    pocket = PrometheusJudge("pocket-judge", backend="scripted", outputs=[])
    assert (smol.force_verdict, pocket.force_verdict) == ("always", "cut")  # the presets'
    mine = PrometheusJudge("smollm2-135m-instruct", backend="scripted", outputs=[], force_verdict="never")
    assert mine.force_verdict == "never"  # the user's over the preset's
