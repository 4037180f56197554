"""The public item types (``GradeItem``, ``PairItem``: validated where built) and the judge's item path, which the
list forms (``grade``/``compare``) only feed: the same items give the same outcomes either way."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle

import pytest

from prom_reward import GradeItem, InputError, PairItem, Rubric, get_rubric
from prom_reward.core.items import absolute_items, relative_items
from prom_reward.experimental import CascadeJudge
from tests.judges import judge_by_rank

HELPFUL = get_rubric("helpfulness")


@pytest.mark.parametrize(
    "args, want",
    [
        (("q", "r", "helpfulness"), ("q", "r", HELPFUL, None)),
        (("", "", "helpfulness"), ("", "", HELPFUL, None)),  # empty text is text: an empty reply is judged
        (("q", "r", HELPFUL, None), ("q", "r", HELPFUL, None)),
        (("q", "r", {"criteria": "Kind?"}, "ref"), ("q", "r", Rubric("Kind?"), "ref")),
        (("q", "r", "[Kind?]\nScore 1: no\nScore 2: a bit\nScore 3: so so\nScore 4: yes\nScore 5: very"), None),
    ],
)
def test_a_grade_item_keeps_its_texts_and_resolves_its_rubric(args, want) -> None:
    item = GradeItem(*args)
    assert isinstance(item.rubric, Rubric)
    if want is not None:
        assert (item.instruction, item.response, item.rubric, item.reference_answer) == want
    else:
        assert item.rubric.criteria == "Kind?" and len(item.rubric.descriptions) == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.response = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(item)) == item  # items cross process boundaries (Ray jobs, workers)


@pytest.mark.parametrize(
    "args, field, says",
    [
        ((7, "r", "helpfulness"), "instruction", "instruction must be a str, got int"),
        (("q", None, "helpfulness"), "response", "response must be a str, got NoneType"),
        (("q", b"r", "helpfulness"), "response", "response must be a str, got bytes"),
        (("q", "bad \ud800", "helpfulness"), "response", "response holds a lone surrogate"),
        (("q", "r", "helpfulnes"), "rubric", "unknown rubric 'helpfulnes'"),
        (("q", "r", None), "rubric", "no rubric: rubric is missing or None"),
        (("q", "r", 3.5), "rubric", "cannot make a rubric from float"),
        (("q", "r", "helpfulness", 42), "reference_answer", "reference_answer must be a str or None, got int"),
        (("q", "r", "helpfulness", "ref \udfff"), "reference_answer", "reference_answer holds a lone surrogate"),
    ],
)
def test_a_bad_grade_item_raises_naming_the_field_and_the_fix(args, field, says) -> None:
    with pytest.raises(InputError) as e:
        GradeItem(*args)
    assert e.value.field == field and e.value.index is None
    assert says in str(e.value) and ("fix" in str(e.value) or "; " in str(e.value))


@pytest.mark.parametrize(
    "args, field",
    [
        (("q", "a", 5, "helpfulness"), "response_b"),
        (("q", ["a"], "b", "helpfulness"), "response_a"),
        (("q", "a", "b", "nope"), "rubric"),
        (("q", "a", "b", "helpfulness", 1.0), "reference_answer"),
    ],
)
def test_a_bad_pair_item_raises_naming_the_field(args, field) -> None:
    with pytest.raises(InputError) as e:
        PairItem(*args)
    assert e.value.field == field


def test_a_pair_item_needs_only_criteria_and_replace_validates_again() -> None:
    item = PairItem("q", "a", "b", Rubric("Kind?"))
    assert (item.response_a, item.response_b, item.rubric.criteria, item.reference_answer) == ("a", "b", "Kind?", None)
    assert dataclasses.replace(item, response_a="c").response_a == "c"
    with pytest.raises(InputError, match="response_b must be a str"):
        dataclasses.replace(item, response_b=3)


def test_the_list_builders_keep_a_placeholder_for_a_failed_item_and_name_its_index() -> None:
    failed: dict[int, InputError] = {}
    items = absolute_items(["q0", 1, "q2"], ["r0", "r1", "r2"], ["helpfulness", "honesty", "nope"], failed=failed)
    assert len(items) == 3 and items[0] == GradeItem("q0", "r0", "helpfulness")
    assert sorted(failed) == [1, 2] and failed[1].field == "instruction" and failed[2].field == "rubric"
    assert str(failed[1]).startswith("item 1: instruction must be a str") and failed[1].index == 1
    pairs = relative_items(["q"], ["a"], [None], "helpfulness", failed=(bad := {}))
    assert len(pairs) == 1 and bad[0].field == "response_b"
    with pytest.raises(InputError, match="^item 0: response_b must be a str"):
        relative_items(["q"], ["a"], [None], "helpfulness")


@pytest.mark.parametrize(
    "items, says",
    [
        ("not a list", "items: expected a list of GradeItem, got str"),
        (GradeItem("q", "r", "helpfulness"), "for a single item pass [item]"),
        ([GradeItem("q", "r", "helpfulness"), ("q", "r", "helpfulness")], "item 1: expected a GradeItem, got tuple"),
        ([PairItem("q", "a", "b", "helpfulness")], "item 0: expected a GradeItem, got PairItem"),
    ],
)
def test_grade_items_takes_a_list_of_grade_items_only(items, says) -> None:
    judge = judge_by_rank({"good": 4})
    with pytest.raises(InputError, match=says.replace("[", r"\[").replace("]", r"\]")):
        judge.grade_items(items)


def _grade_view(g) -> tuple:
    return (g.score, g.scores, g.feedback, g.error, g.truncated, g.failures)


def _verdict_view(v) -> tuple:
    return (v.winner, v.tie, v.swap_agreement, v.p_a, v.error, v.reason)


RANKS = {"good": 4, "fair": 3, "bad": 1}
INS = ["q0", "q1", "q2", "q3"]
RES = ["good answer", "bad answer", "fair answer", "unknown"]
REFS = ["ref", None, None, "ref3"]


def test_grade_items_and_grade_give_the_same_outcomes() -> None:
    seen_items: list = []
    seen_lists: list = []
    items = [GradeItem(q, r, "helpfulness", ref) for q, r, ref in zip(INS, RES, REFS, strict=True)]
    by_items = judge_by_rank(RANKS, seen=seen_items).grade_items(items)
    by_lists = judge_by_rank(RANKS, seen=seen_lists).grade(INS, RES, "helpfulness", REFS)
    assert [_grade_view(g) for g in by_items] == [_grade_view(g) for g in by_lists]
    assert [g.score for g in by_items] == [4.0, 1.0, 3.0, None] and by_items[3].error.kind == "output"
    assert [r.user for r in seen_items] == [r.user for r in seen_lists]  # the very same prompts
    assert asyncio.run(judge_by_rank(RANKS).agrade_items(items))[0].score == 4.0


@pytest.mark.parametrize("swap", [False, True])
def test_compare_items_and_compare_give_the_same_outcomes(swap: bool) -> None:
    a, b = ["good a", "bad a", "fair a"], ["bad b", "good b", "fair b"]
    items = [PairItem(q, x, y, "helpfulness") for q, x, y in zip(INS, a, b, strict=False)]
    by_items = judge_by_rank(RANKS, tie="A").compare_items(items, swap=swap)
    by_lists = judge_by_rank(RANKS, tie="A").compare(INS[:3], a, b, "helpfulness", swap=swap)
    assert [_verdict_view(v) for v in by_items] == [_verdict_view(v) for v in by_lists]
    assert [v.winner for v in by_items][:2] == ["A", "B"]
    assert asyncio.run(judge_by_rank(RANKS).acompare_items(items[:1], swap=swap))[0].winner == "A"


def test_an_item_whose_rubric_misfits_the_judge_format_fails_alone() -> None:
    """A criteria-only rubric is a valid item (pairwise needs no more), but Prometheus 2 grades need five score
    descriptions: that item fails with an input error, its batch-mate is graded."""
    items = [GradeItem("q", "good", Rubric("Kind?")), GradeItem("q", "good", "helpfulness")]
    bad, ok = judge_by_rank(RANKS).grade_items(items)
    assert bad.score is None and bad.error.kind == "input" and "score descriptions" in bad.error.reason
    assert ok.score == 4.0 and ok.error is None
    (v,) = judge_by_rank(RANKS).compare_items([PairItem("q", "good", "bad", Rubric("Kind?"))])
    assert v.winner == "A"


def test_the_cascade_takes_items_like_a_judge() -> None:
    primary, fallback = judge_by_rank({"good": 4, "bad": 2}, num_samples=2), judge_by_rank({"good": 5, "bad": 1})
    cascade = CascadeJudge(primary, fallback, threshold=0.5, indicator="sample_agreement")
    items = [GradeItem("q", "good", "helpfulness"), GradeItem("q", "unknown", "helpfulness")]
    first, second = cascade.grade_items(items)
    assert (first.score, first.decided_by) == (4.0, "primary")  # its two samples agree: kept
    assert second.score is None and second.decided_by == "fallback"  # failed by the primary: routed, failed again
    stats = cascade.cascade_stats
    assert (stats.routed_failed, stats.fallback_calls, stats.fallback_failed) == (1, 1, 1)
    (v,) = cascade.compare_items([PairItem("q", "bad", "good", "helpfulness")], swap=True)
    assert v.winner == "B" and v.decided_by == "primary"
