"""PrometheusJudge logic, exactly, on the scripted backend (real engines: test_vllm_engine.py)."""

from __future__ import annotations

import asyncio
import math

import pytest

from prom_reward import BackendError, ConfigError, InputError, PrometheusJudge, Rubric
from prom_reward.backends.base import Completion, GenerationRequest, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.format.templates import ABS_SYSTEM_PROMPT, REL_SYSTEM_PROMPT


def judge_with(outputs=None, respond=None, **kw) -> tuple[PrometheusJudge, ScriptedBackend]:
    backend = ScriptedBackend(outputs=outputs, respond=respond, context=kw.pop("context", None))
    return PrometheusJudge(backend=backend, **kw), backend


def lp_completion(text: str, verdict_probs: dict[str, float]) -> Completion:
    """A completion whose last token is the verdict, with the given top-k distribution."""
    head, verdict = text[:-1], text[-1]
    top = {k: math.log(v) for k, v in verdict_probs.items()}
    lps = (TokenLogprobs(head, -0.1, {head: -0.1}), TokenLogprobs(verdict, top[verdict], top))
    return Completion(text=text, logprobs=lps, finish_reason="stop", completion_tokens=2)


def test_grade_renders_exact_prompt_and_batches_all_items():
    judge, backend = judge_with(outputs=["Good. [RESULT] 4", "Bad. [RESULT] 1", "Ok. [RESULT] 3"])
    grades = judge.grade(["q1", "q2", "q3"], ["r1", "r2", "r3"], "helpfulness", ["ref", None, "ref3"])
    assert [g.score for g in grades] == [4.0, 1.0, 3.0]
    assert len(backend.calls) == 1 and len(backend.calls[0]) == 3  # one batch
    req = backend.calls[0][0]
    assert req.system == ABS_SYSTEM_PROMPT
    assert "###Reference Answer (Score 5):\nref\n" in req.user
    assert "Reference Answer" not in backend.calls[0][1].user and "None" not in backend.calls[0][1].user
    assert grades[0].feedback == "Good." and grades[0].raw_outputs == ("Good. [RESULT] 4",)


def test_sampling_defaults_and_key_by_key_merge():
    judge, backend = judge_with(outputs=["x [RESULT] 2"], sampling={"temperature": 0})
    judge.grade(["q"], ["r"], "honesty")
    s = backend.calls[0][0].sampling
    assert (s.temperature, s.top_p, s.repetition_penalty, s.max_tokens) == (0, 0.9, 1.03, 1024)
    judge.backend = ScriptedBackend(outputs=["x [RESULT] 2"])
    judge.grade(["q"], ["r"], "honesty", sampling={"max_tokens": 50})
    s2 = judge.backend.calls[0][0].sampling
    assert (s2.temperature, s2.max_tokens) == (0, 50)


def test_unknown_sampling_option_is_rejected_with_valid_names():
    with pytest.raises(ConfigError, match="temprature.*closest: temprature -> temperature.*valid: "):
        PrometheusJudge(backend=ScriptedBackend(outputs=[]), sampling={"temprature": 0.5})


def test_num_samples_uses_n_and_keeps_all_samples():
    judge, backend = judge_with(outputs=["a [RESULT] 3", "b [RESULT] 4", "c [RESULT] 5"], num_samples=3)
    (g,) = judge.grade(["q"], ["r"], "reasoning")
    assert backend.calls[0][0].n == 3
    assert g.scores == (3, 4, 5) and g.score == 4.0 and len(g.samples) == 3


def test_unparseable_outputs_are_resampled_then_none_with_raw_kept():
    judge, backend = judge_with(outputs=["rambling", "still nothing", "nope"], max_retries=2)
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert g.score is None and not g.ok
    assert g.retries == 2 and g.failures == 3
    assert g.raw_outputs == ("rambling", "still nothing", "nope")
    assert len(backend.calls) == 3
    assert judge.stats.parse_failures == 3


def test_retry_only_asks_for_missing_samples():
    judge, backend = judge_with(outputs=["ok [RESULT] 2", "junk", "fine [RESULT] 4"], num_samples=2)
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert [r.n for call in backend.calls for r in call] == [2, 1]
    assert g.scores == (2, 4) and g.retries == 1 and g.failures == 1


def test_greedy_retries_switch_to_temperature_one():
    judge, backend = judge_with(outputs=["junk", "x [RESULT] 3"], sampling={"temperature": 0.0})
    judge.grade(["q"], ["r"], "helpfulness")
    assert [c[0].sampling.temperature for c in backend.calls] == [0.0, 1.0]


def test_expected_score_from_given_logprobs():
    out = lp_completion("Solid answer. [RESULT] 4", {"4": 0.5, "5": 0.3, "3": 0.1, "x": 0.1})
    judge, backend = judge_with(outputs=[out], expected_score=True)
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert backend.calls[0][0].sampling.logprobs == 20
    assert g.score == 4.0
    assert g.probabilities == pytest.approx({3: 1 / 9, 4: 5 / 9, 5: 3 / 9})
    assert g.expected_score == pytest.approx((3 * 1 + 4 * 5 + 5 * 3) / 9)
    assert g.samples[0].verdict_mass == pytest.approx(0.9)


def test_forced_verdict_reads_next_token_distribution():
    def respond(req: GenerationRequest, i: int):
        if not req.assistant_prefix:
            return "The response is thorough but misses"  # cut off, no verdict
        assert req.assistant_prefix.endswith("misses [RESULT] ")
        assert req.sampling.max_tokens == 3 and req.sampling.logprobs == 20
        top = {"2": math.log(0.2), "3": math.log(0.7), "a": math.log(0.1)}
        return Completion("3", (TokenLogprobs("3", top["3"], top),), "length", 1)

    judge, backend = judge_with(respond=respond, force_verdict="always")
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert g.score == 3.0 and g.forced == 1 and g.retries == 0
    assert g.samples[0].forced and g.samples[0].text == "The response is thorough but misses"
    assert g.probabilities == pytest.approx({2: 2 / 9, 3: 7 / 9})
    assert len(backend.calls) == 2


def test_forced_verdict_skips_outputs_with_a_broken_marker():
    judge, backend = judge_with(outputs=["meh [RESULT] 2.5", "fine [RESULT] 2"], force_verdict="always")
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert g.score == 2.0 and g.forced == 0 and g.retries == 1
    assert all(not r.assistant_prefix for c in backend.calls for r in c)


def test_compare_with_swap_agreement_and_disagreement():
    # item 0: A then (swapped) B -> original A wins both orders; item 1: A and A -> disagreement
    outputs = ["A is better. [RESULT] A", "A first. [RESULT] A", "B better. [RESULT] B", "A again. [RESULT] A"]
    judge, backend = judge_with(outputs=outputs)
    v = judge.compare(["q0", "q1"], ["a0", "a1"], ["b0", "b1"], "helpfulness", swap=True)
    assert len(backend.calls) == 1 and len(backend.calls[0]) == 4
    swapped = backend.calls[0][2]
    assert swapped.system == REL_SYSTEM_PROMPT
    assert "###Response A:\nb0\n" in swapped.user and "###Response B:\na0\n" in swapped.user
    assert v[0].winner == "A" and v[0].swap_agreement is True and not v[0].tie
    assert v[1].winner is None and v[1].tie and v[1].swap_agreement is False
    assert v[1].order_winners == ("A", "B")


def test_compare_p_a_averages_both_orders():
    o1 = lp_completion("x [RESULT] A", {"A": 0.8, "B": 0.2})
    o2 = lp_completion("y [RESULT] B", {"A": 0.4, "B": 0.6})  # swapped order: B = original A
    judge, _ = judge_with(outputs=[o1, o2], expected_score=True)
    (v,) = judge.compare(["q"], ["a"], ["b"], "helpfulness", swap=True)
    assert v.winner == "A" and v.p_a == pytest.approx((0.8 + 0.6) / 2)


def test_compare_uses_only_criteria_of_the_rubric():
    judge, backend = judge_with(outputs=["[RESULT] B"])
    judge.compare(["q"], ["a"], ["b"], Rubric("Is it kind?", ("1", "2", "3", "4", "5")))
    assert "###Score Rubric:\n[Is it kind?]\n\n###Feedback: " in backend.calls[0][0].user


def test_tie_rounds_resample_at_temperature_one_until_a_winner():
    outputs = [
        "[RESULT] 3",
        "[RESULT] 3",  # round 0: tie
        "[RESULT] 4",
        "[RESULT] 4",  # round 1: tie again
        "[RESULT] 2",
        "[RESULT] 5",
    ]  # round 2: B wins
    judge, backend = judge_with(outputs=outputs, sampling={"temperature": 0.0})
    (v,) = judge.compare_by_grades(["q"], ["a"], ["b"], "helpfulness")
    assert v.winner == "B" and v.tie_rounds == 2 and not v.tie
    assert v.grades[0].score == 2.0 and v.grades[1].score == 5.0
    temps = [c[0].sampling.temperature for c in backend.calls]
    assert temps == [0.0, 1.0, 1.0]


def test_tie_rounds_cap_reports_a_tie():
    judge, _ = judge_with(outputs=["[RESULT] 3"] * 6, max_tie_rounds=2)
    (v,) = judge.compare_by_grades(["q"], ["a"], ["b"], "helpfulness")
    assert v.winner is None and v.tie and v.tie_rounds == 2


def test_empty_batch_returns_empty_without_calling_backend():
    judge, backend = judge_with(outputs=[])
    assert judge.grade([], [], "helpfulness") == [] and judge.compare([], [], [], "helpfulness") == []
    assert backend.calls == []


@pytest.mark.parametrize(
    "args, field",
    [
        ((["q", "q2"], ["r"], "helpfulness"), "responses"),
        (("q", ["r"], "helpfulness"), "instructions"),
        ((["q"], ["r"], Rubric("Kind?")), "rubric"),
        ((["q"], ["r"], "helpfulnes"), "rubric"),
    ],
)
def test_a_malformed_batch_raises_before_any_generation(args, field):
    judge, backend = judge_with(outputs=["x [RESULT] 3"] * 3)
    with pytest.raises(InputError) as e:
        judge.grade(*args)
    assert e.value.field == field and e.value.index is None
    assert backend.calls == []


@pytest.mark.parametrize(
    "args, bad, reason",
    [
        ((["q", "q2"], [3, "r"], "helpfulness"), 0, "response must be a str, got int"),
        ((["q", None], ["r", "s"], "helpfulness"), 1, "instruction must be a str, got NoneType"),
        ((["q", "q2"], ["r", "bad \ud800"], "helpfulness"), 1, "response holds a lone surrogate"),
        ((["q", "q2"], ["r", "s"], ["helpfulness", Rubric("Kind?")]), 1, "rubric"),
        ((["q", "q2"], ["r", "s"], "helpfulness", ["ref", 7]), 1, "reference_answer must be a str or None"),
    ],
)
def test_an_unusable_item_fails_alone_and_its_batch_mates_are_judged(args, bad, reason):
    judge, backend = judge_with(outputs=["x [RESULT] 3"] * 3)
    grades = judge.grade(*args)
    assert [g.score for g in grades] == [None if i == bad else 3.0 for i in range(2)]
    assert grades[bad].error.kind == "input" and reason in grades[bad].error.reason
    assert grades[1 - bad].error is None and len(backend.calls) == 1 and len(backend.calls[0]) == 1


def test_overlong_prompt_fails_its_item_alone_with_the_token_count():
    judge, backend = judge_with(outputs=["x [RESULT] 3"] * 2, context=400, sampling={"max_tokens": 100})
    long = "word " * 500
    short, over = judge.grade(["q", "q"], ["short", long], "helpfulness")
    assert short.score == 3.0 and over.score is None and over.error.kind == "input"
    assert "tokens" in over.error.reason and "truncate_response=True" in over.error.reason
    (v,) = judge.compare(["q"], [long], ["short"], "helpfulness", swap=True)
    assert v.winner is None and not v.tie and v.error.kind == "input"


def test_a_verdict_without_any_parse_is_an_output_failure():
    judge, _ = judge_with(outputs=["no verdict"] * 9, max_retries=0)
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    (v,) = judge.compare(["q"], ["a"], ["b"], "helpfulness")
    assert g.error.kind == "output" and "no verdict in" in g.error.reason
    assert v.winner is None and v.error.kind == "output"


def test_opt_in_truncation_fits_the_response():
    judge, backend = judge_with(
        outputs=["x [RESULT] 3"], context=400, sampling={"max_tokens": 100}, truncate_response=True
    )
    (g,) = judge.grade(["q"], ["word " * 500], "helpfulness")
    assert g.truncated and g.score == 3.0
    (count,) = asyncio.run(backend.acount_tokens(backend.calls[0]))
    assert count <= 300
    assert "word word" in backend.calls[0][0].user


def test_truncating_a_pair_shortens_the_long_response_and_keeps_the_short_one_whole():
    judge, backend = judge_with(
        outputs=["x [RESULT] A", "x [RESULT] B"], context=400, sampling={"max_tokens": 100}, truncate_response=True
    )
    (v,) = judge.compare(["q"], ["word " * 500], ["a short answer"], "helpfulness", swap=True)
    assert v.truncated and v.winner == "A"
    for request in backend.calls[0]:
        assert asyncio.run(backend.acount_tokens([request]))[0] <= 300
        assert "a short answer\n" in request.user and "word word" in request.user


def test_backend_returning_too_few_results_is_an_error_not_a_loss():
    class Short(ScriptedBackend):
        def generate(self, requests):
            return super().generate(requests)[:-1]

    judge = PrometheusJudge(backend=Short(outputs=["x [RESULT] 3"] * 2))
    with pytest.raises(BackendError, match="returned 1 results for 2 requests"):
        judge.grade(["q", "q2"], ["r", "r2"], "helpfulness")


def test_retry_requests_carry_their_attempt_number():
    judge, backend = judge_with(outputs=["junk", "junk", "x [RESULT] 3"])
    judge.grade(["q"], ["r"], "helpfulness")
    assert [c[0].attempt for c in backend.calls] == [0, 1, 2]
