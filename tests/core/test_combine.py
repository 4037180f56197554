"""``prom_reward.core.combine``: the one rule that turns the samples of one order or both into a verdict."""

from __future__ import annotations

import pytest

from prom_reward.core.combine import grade_from_run, verdict_from_grades, verdict_from_runs
from prom_reward.core.results import Grade, JudgeSample
from prom_reward.core.sampler import ItemRun

WHY = "the format's reason"
"""The judge format's reason for an output without a verdict; a no-verdict reason ends with the last one."""


def _run(*verdicts: str | None) -> ItemRun:
    """One order's samples: "A"/"B" as the judge saw the labels, None for an output without a verdict."""
    return ItemRun(
        samples=[
            JudgeSample(f"x [RESULT] {v}" if v else "no verdict", "x", v, reason=None if v else WHY) for v in verdicts
        ]
    )


FAILED = "no verdict in 1 sample(s) (last: the format's reason)"

# first order as given, the swapped order as the judge saw it (its "B" is the original A), then the verdict:
# (winner, tie, p_a, swap_agreement, reason)
CASES = {
    "both orders agree on A": (_run("A"), _run("B"), ("A", False, 1.0, True, None)),
    "both orders agree on B": (_run("B"), _run("A"), ("B", False, 0.0, True, None)),
    "orders disagree: a tie": (_run("A"), _run("A"), (None, True, 0.5, False, "tie: the two orders disagree")),
    "order B-A failed": (_run("A"), _run(None), (None, False, None, None, f"order B-A failed: {FAILED}")),
    "order A-B failed": (_run(None), _run("A"), (None, False, None, None, f"order A-B failed: {FAILED}")),
    "both failed": (
        _run(None, None),
        _run(None),
        (None, False, None, None, "no verdict in 3 sample(s) (last: the format's reason)"),
    ),
    "one order split, the other decided: a tie": (
        _run("A", "B"),
        _run("B", "B"),
        (None, True, 0.75, None, "tie: the samples split evenly"),
    ),
    "one failed sample in an order that still decided": (
        _run("A", None),
        _run("B"),
        ("A", False, 1.0, True, None),
    ),
}


@pytest.mark.parametrize(("first", "swapped", "want"), list(CASES.values()), ids=list(CASES))
def test_both_orders(first, swapped, want):
    v = verdict_from_runs(first, swapped)
    assert (v.winner, v.tie, v.p_a, v.swap_agreement, v.reason) == want
    assert v.ok == (want[0] is not None) and v.failures == first.failures + swapped.failures
    assert len(v.samples) == len(first.samples) + len(swapped.samples)


@pytest.mark.parametrize(
    ("run", "want"),
    [
        (_run("A"), ("A", False, 1.0, None)),
        (_run("B", "B", None), ("B", False, 0.0, None)),
        (_run("A", "B"), (None, True, 0.5, "tie: the samples split evenly")),
        (_run(None), (None, False, None, FAILED)),
    ],
    ids=["decided", "decided, one sample failed", "split", "failed"],
)
def test_one_order(run, want):
    v = verdict_from_runs(run)
    assert (v.winner, v.tie, v.p_a, v.reason) == want and v.swap_agreement is None


@pytest.mark.parametrize(
    ("a", "b", "tie", "want"),
    [
        (4.0, 2.0, False, ("A", None)),
        (2.0, 4.0, False, ("B", None)),
        (3.0, 3.0, True, (None, "tie: equal grades after 5 tie round(s)")),
        (None, 4.0, False, (None, "response A not graded: no verdict in 1 sample(s)")),
        (4.0, None, False, (None, "response B not graded: no verdict in 1 sample(s)")),
    ],
)
def test_verdict_from_grades_says_why_there_is_no_winner(a, b, tie, want):
    def grade(score):
        return Grade(score=score, failures=0 if score is not None else 1)

    v = verdict_from_grades(grade(a), grade(b), tie=tie, tie_rounds=5)
    assert (v.winner, v.reason) == want and v.tie == tie


@pytest.mark.parametrize(
    "sample, reason",
    [
        (JudgeSample("x [RESULT] 4", "x", 4), "the judge returned no logprobs for the verdict token"),
        (JudgeSample("x [RESULT] 4", "x", 4, scored_tokens=9), "the judge's top logprobs at the verdict token hold"),
        (JudgeSample("x [RESULT] 4", "x", 4, probabilities={"4": 1.0}), None),
        (JudgeSample("x", "x", None), None),  # no verdict: the grade's failure says why, not this
    ],
)
def test_a_grade_says_why_it_has_no_expected_score(sample, reason):
    g = grade_from_run(ItemRun(samples=[sample]))
    assert (g.expected_reason or "")[: len(reason or "")] == (reason or "") and (g.expected_reason is None) == (
        reason is None
    )
    assert g.expected_reason is None or "fix: " in g.expected_reason
