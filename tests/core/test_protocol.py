"""The Judge protocol (what rewards, jobs and the cascade take) and the Judgment base of Grade and Verdict."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from prom_reward import CascadeJudge, Grade, PrometheusJudge, Verdict
from prom_reward.core.protocol import Judge
from prom_reward.core.results import Judgment
from tests.judges import judge_by_rank


def test_both_judges_are_judges_and_a_partial_object_is_not() -> None:
    judge = judge_by_rank({"good": 4, "bad": 2})
    cascade = CascadeJudge(judge, judge_by_rank({"good": 5}), threshold=1.0, indicator="sample_agreement")
    assert isinstance(judge, Judge) and isinstance(cascade, Judge)
    assert cascade.num_samples == judge.num_samples == 1 and cascade.sampling is judge.sampling

    class GradesOnly:
        def grade(self, *args: object) -> list[Grade]:
            return []

    assert not isinstance(GradesOnly(), Judge)


@pytest.mark.parametrize("method", ["grade", "compare", "compare_by_grades"])
def test_public_signatures_match_the_protocol_and_hide_nothing_private(method: str) -> None:
    want = inspect.signature(getattr(Judge, method))
    for cls in (PrometheusJudge, CascadeJudge):
        got = inspect.signature(getattr(cls, method))
        assert list(got.parameters) == list(want.parameters), (cls.__name__, method)
        assert not any(name.startswith("_") for name in got.parameters)


def test_tie_rounds_keep_their_attempt_numbers_apart() -> None:
    seen: list = []
    judge = judge_by_rank({"same": 3}, seen=seen)
    (v,) = judge.compare_by_grades(["q"], ["same"], ["same"], "helpfulness", max_tie_rounds=2)
    assert v.tie and v.winner is None and v.tie_rounds == 2
    assert [r.attempt for r in seen] == [0, 0, 1000, 1000, 2000, 2000]


def test_grade_and_verdict_share_the_judgment_fields_once() -> None:
    shared = {f.name for f in dataclasses.fields(Judgment)}
    assert shared == {
        "feedback",
        "samples",
        "retries",
        "failures",
        "forced",
        "prompt_tokens",
        "completion_tokens",
        "confidence",
        "decided_by",
        "truncated",
        "error",
    }
    own_grade = [f.name for f in dataclasses.fields(Grade) if f.name not in shared]
    own_verdict = [f.name for f in dataclasses.fields(Verdict) if f.name not in shared]
    assert own_grade == ["score", "scores", "probabilities", "expected_score"]
    assert own_verdict == ["winner", "p_a", "tie", "order_winners", "grades", "tie_rounds", "reason"]
    g, v = Grade(None, failures=2), Verdict("A", prompt_tokens=5)
    assert (g.ok, v.ok, g.failures, v.prompt_tokens, g.raw_outputs) == (False, True, 2, 5, ())
    with pytest.raises(TypeError):
        Judgment()  # abstract: a judgment is a Grade or a Verdict
