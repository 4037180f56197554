"""Aggregations, exact: each mode's formula on known per-criterion scores, a failed essential criterion, a
failed other criterion dropped and counted, pitfalls subtracting, a custom callable."""

from __future__ import annotations

import numpy as np
import pytest

from prom_reward.checklist.aggregate import AGGREGATIONS, CriterionScore, aggregate, get_aggregation
from prom_reward.checklist.criteria import Criterion
from prom_reward.errors import ConfigError, UnknownNameError

ESS = Criterion("essential one", 2.0, "essential")
IMP = Criterion("important one", 1.0, "important")
OPT = Criterion("optional one", 0.5, "optional")
PIT = Criterion("a pitfall", 1.5, "pitfall")


def s(c: Criterion, score: float | None, reason: str | None = None) -> CriterionScore:
    return CriterionScore(c, score, reason)


@pytest.mark.parametrize(
    ("how", "scores", "expected"),
    [
        # weighted mean: (sum_Q w s - sum_P w s) / sum_Q w
        ("weighted_mean", [s(ESS, 1.0), s(IMP, 0.5), s(OPT, 0.0)], (2.0 + 0.5) / 3.5),
        ("weighted_mean", [s(ESS, 1.0), s(IMP, 1.0), s(PIT, 1.0)], (2.0 + 1.0 - 1.5) / 3.0),
        ("weighted_mean", [s(ESS, 0.0), s(PIT, 1.0)], -1.5 / 2.0),  # a pitfall takes it below 0
        ("weighted_mean", [s(PIT, 0.25)], 1.0 - 0.25),  # pitfalls only: 1 - sum_P w s / sum_P w
        # minimum: the weakest criterion, a pitfall as 1 - s
        ("minimum", [s(ESS, 1.0), s(IMP, 0.75), s(OPT, 0.5)], 0.5),
        ("minimum", [s(ESS, 1.0), s(PIT, 0.75)], 0.25),
        # gate: 0 unless every essential is satisfied (> 0.5), else weighted mean of the rest
        ("gate", [s(ESS, 0.5), s(IMP, 1.0)], 0.0),
        ("gate", [s(ESS, 0.75), s(IMP, 1.0), s(OPT, 0.0)], 1.0 / 1.5),
        ("gate", [s(ESS, 1.0), s(IMP, 1.0), s(PIT, 1.0)], (1.0 - 1.5) / 1.0),
        ("gate", [s(ESS, 1.0)], 1.0),  # no rest
        # a custom callable sees the judged criteria
        (lambda xs: float(len(xs)), [s(ESS, 1.0), s(IMP, None, "cut"), s(OPT, 0.0)], 2.0),
    ],
)
def test_each_aggregation_gives_its_formula(how, scores, expected):
    got = aggregate(scores, how)
    assert got.value == pytest.approx(expected)
    assert got.reason is None


@pytest.mark.parametrize("how", [*AGGREGATIONS, lambda xs: 1.0])
def test_a_failed_essential_criterion_gives_none_with_its_reason(how):
    got = aggregate([s(IMP, 1.0), s(ESS, None, "the judge gave no verdict")], how)
    assert got.value is None
    assert got.reason == "essential criterion 1 ('essential one') could not be judged: the judge gave no verdict"


@pytest.mark.parametrize(
    ("how", "expected"), [("weighted_mean", (2.0 * 1.0 + 0.5 * 0.0) / 2.5), ("minimum", 0.0), ("gate", 0.0)]
)
def test_another_failed_criterion_is_dropped_and_counted(how, expected):
    got = aggregate([s(ESS, 1.0), s(IMP, None, "transport: down"), s(OPT, 0.0)], how)
    assert got.value == pytest.approx(expected)
    assert got.dropped == 1


def test_nothing_judged_gives_none_with_the_first_reason():
    got = aggregate([s(IMP, None, "cut"), s(OPT, None, "other")], "weighted_mean")
    assert (got.value, got.dropped) == (None, 2)
    assert got.reason == "no criterion of the checklist could be judged: cut"


def test_a_callable_returning_none_gives_none_with_a_reason():
    got = aggregate([s(IMP, 1.0)], lambda xs: None)
    assert got.value is None and got.reason == "the checklist aggregation gave no value"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0.5", True, [1.0]])
def test_a_callable_returning_no_finite_number_gives_none_with_a_reason(value):
    """A NaN (the mean of nothing) or text from a custom aggregation never reaches a trainer as a reward (it was
    passed on as NaN, or raised ValueError out of the reward); numpy numbers are numbers."""
    got = aggregate([s(IMP, 1.0)], lambda xs: value)
    assert got.value is None and got.reason.startswith("the checklist aggregation gave ")
    assert "not a finite number; fix the aggregation" in got.reason
    assert aggregate([s(IMP, 1.0)], lambda xs: np.float32(0.25)).value == 0.25
    assert aggregate([s(IMP, 1.0)], lambda xs: np.int64(2)).value == 2.0


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(UnknownNameError, match="gate, minimum, weighted_mean|weighted_mean"):
        get_aggregation("median")
    with pytest.raises(ConfigError, match="got int"):
        get_aggregation(3)
