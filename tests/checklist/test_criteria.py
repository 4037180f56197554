"""A row's checklist: parsed and validated before any judging, errors naming row, criterion, field and fix; a
criterion without a rubric gets a binary rubric that fits each judge format's scale."""

from __future__ import annotations

import pytest

from prom_reward.checklist.criteria import (
    Criterion,
    checklist_rubric,
    criterion_rubric,
    parse_checklist,
    satisfied,
)
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.judge_format import JUDGE_FORMATS, get_judge_format
from prom_reward.format.rubrics import Rubric

ABSOLUTE_FORMATS = [n for n in JUDGE_FORMATS if "absolute" in get_judge_format(n).tasks]


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (["Says 4"], [("Says 4", 1.0, "important", None)]),
        ('["a", "b"]', [("a", 1.0, "important", None), ("b", 1.0, "important", None)]),
        (
            [
                {"criterion": " Cites ", "weight": 3, "category": "essential"},
                {"criterion": "Rude", "category": "pitfall"},
            ],  # noqa: E501
            [("Cites", 3.0, "essential", None), ("Rude", 1.0, "pitfall", None)],
        ),
        ([{"criterion": "kind", "rubric": "helpfulness"}], [("kind", 1.0, "important", "helpfulness")]),
        ((("tuple",)), [("tuple", 1.0, "important", None)]),
        (  # a Parquet / datasets struct column: the keys a criterion lacks are null
            [{"criterion": "kind", "weight": None, "category": None, "rubric": None}],
            [("kind", 1.0, "important", None)],
        ),
    ],
)
def test_good_checklists_parse(value, parsed):
    got = parse_checklist(value, row=0)
    assert [(c.text, c.weight, c.category) for c in got] == [p[:3] for p in parsed]
    for c, p in zip(got, parsed, strict=True):
        assert (c.rubric is None) == (p[3] is None)


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ({"criterion": "x"}, ["row 7: checklist: expected a list", "got dict", "fix:"]),
        (42, ["row 7: checklist: expected a list", "got int"]),
        ("Only one", ["row 7: checklist: expected a list", "got str"]),
        ('["a", ', ["row 7: checklist: a string starting with '[' must be a JSON list", "fix: write valid JSON"]),
        ([], ["row 7: checklist: expected at least one criterion", "fix:"]),
        ([""], ["row 7, criterion 0: criterion: expected a non-empty string", "fix: give the criterion"]),
        (["  "], ["row 7, criterion 0: criterion: expected a non-empty string, got '  '; fix: give the criterion"]),
        (["ok", 3], ["row 7, criterion 1: criterion: expected a string or a mapping", "got int"]),
        ([{"weight": 2}], ["row 7, criterion 0: criterion: expected a non-empty string, got None"]),
        ([{"criterion": "x", "weight": "high"}], ["row 7, criterion 0 ('x'): weight: expected a finite number > 0"]),
        ([{"criterion": "x", "weight": float("nan")}], ["criterion 0 ('x'): weight:", "got nan", "fix: give a number"]),
        ([{"criterion": "x", "weight": float("inf")}], ["weight: expected a finite number > 0, got inf"]),
        ([{"criterion": "x", "weight": True}], ["weight: expected a finite number > 0, got True"]),
        (["a", {"criterion": "x", "weight": -1}], ["row 7, criterion 1 ('x'): weight:", "its category makes it"]),
        ([{"criterion": "x", "category": "vital"}], ["category: expected one of essential, important", "'vital'"]),
        ([{"criterion": "x", "rubric": "no-such"}], ["criterion 0 ('x'): rubric:", "no-such", "fix: give a rubric"]),
        ([{"criterion": "x", "wieght": 2}], ["criterion 0 ('x'): criterion: unknown key(s) wieght"]),
        (["ok \ud800"], ["row 7, criterion 0: criterion: holds a lone surrogate", "fix: give the criterion"]),
    ],
)
def test_bad_checklists_are_refused_naming_row_criterion_field_and_fix(value, fragments):
    with pytest.raises(InputError) as e:
        parse_checklist(value, row=7)
    for fragment in fragments:
        assert fragment in str(e.value)
    assert e.value.index == 7


@pytest.mark.parametrize("name", ABSOLUTE_FORMATS)
@pytest.mark.parametrize("category", ["important", "pitfall"])
def test_the_binary_rubric_fits_every_absolute_format(name, category):
    fmt = get_judge_format(name)
    rubric = criterion_rubric(Criterion("Mentions the dose", category=category), fmt)
    assert len(rubric.descriptions) == len(fmt.scale)
    assert fmt.rubric_problem(rubric, "absolute") is None
    assert "Mentions the dose" in rubric.criteria
    assert ("pitfall" in rubric.criteria) == (category == "pitfall")
    assert (
        checklist_rubric([Criterion("a"), Criterion("b", category="pitfall")], fmt)
        .descriptions[-1]
        .startswith("The response satisfies every criterion")
    )


def test_prometheus_binary_rubric_reads_low_to_high():
    r = criterion_rubric(Criterion("Says 4"), get_judge_format("prometheus2"))
    assert r.criteria == "Does the response satisfy this criterion: Says 4?"
    assert r.descriptions[0] == "The response does not satisfy the criterion."
    assert r.descriptions[4] == "The response fully satisfies the criterion."


def test_a_criterion_keeps_its_own_rubric():
    own = Rubric("Own?", ("1", "2", "3", "4", "5"))
    assert criterion_rubric(Criterion("x", rubric=own), get_judge_format("prometheus2")) is own


@pytest.mark.parametrize(("unit", "held"), [(0.0, False), (0.5, False), (0.75, True), (1.0, True)])
def test_satisfied_means_above_the_middle_of_the_scale(unit, held):
    assert satisfied(unit) is held


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": ""}, "text: expected a non-empty string, got ''"),
        ({"text": None}, "text: expected a non-empty string, got None"),
        ({"text": "x", "weight": 0}, "weight: expected a finite number > 0, got 0; fix: give a finite number > 0"),
        ({"text": "x", "category": "vital"}, "category: expected one of essential, important, optional, pitfall"),
    ],
)
def test_a_criterion_is_validated_naming_its_field(kwargs, message):
    with pytest.raises(ConfigError) as e:
        Criterion(**kwargs)
    assert message in str(e.value)
    assert Criterion("x", 3).weight == 3.0 and isinstance(Criterion("x", 3).weight, float)


def test_a_pairwise_only_format_cannot_write_a_binary_rubric():
    with pytest.raises(ConfigError, match="0-point scale"):
        criterion_rubric(Criterion("x"), get_judge_format("con-j"))
