"""The list forms (``grade``, ``compare`` and their awaited forms), written once over every judge's item methods."""

from __future__ import annotations

import asyncio

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.core.list_forms import ListForms
from prom_reward.errors import InputError
from prom_reward.experimental import CascadeJudge
from tests.judges import judge_by_rank, response_of

LIST_FORMS = ["grade", "compare", "agrade", "acompare"]


@pytest.mark.parametrize("method", LIST_FORMS)
def test_each_list_form_is_one_function_for_every_judge(method: str) -> None:
    one = getattr(ListForms, method)
    assert getattr(PrometheusJudge, method) is one and getattr(CascadeJudge, method) is one
    assert one.__doc__ and one.__name__ == method


def _call(judge: object, method: str, *args: object, **kwargs: object) -> list:
    out = getattr(judge, method)(*args, **kwargs)
    return asyncio.run(out) if method.startswith("a") else out


@pytest.mark.parametrize("method", ["grade", "agrade"])
def test_a_bad_item_fails_in_its_place_and_the_item_method_judges_the_rest(method: str) -> None:
    seen: list[GenerationRequest] = []
    judge = judge_by_rank({"good": 4, "fair": 3}, seen=seen)
    out = _call(judge, method, ["q0", "q1", "q2"], ["good", 7, "fair"], "helpfulness", ["r", "r", None])
    assert [g.score for g in out] == [4.0, None, 3.0] and len(seen) == 2  # the bad item never reached the engine
    assert out[1].error.kind == "input" and out[1].error.reason.startswith("response must be a str, got int")
    assert (out[1].samples, out[1].decided_by, judge.stats.items) == ((), None, 2)


@pytest.mark.parametrize("method", ["compare", "acompare"])
@pytest.mark.parametrize("swap, orders", [(False, (None,)), (True, (None, None))])
def test_a_bad_pair_fails_in_both_orders_without_a_winner(method: str, swap: bool, orders: tuple) -> None:
    judge = judge_by_rank({"good": 4, "bad": 1})
    out = _call(judge, method, ["q", "q"], ["good", "bad"], ["bad", "bad \ud800"], "helpfulness", swap=swap)
    assert [v.winner for v in out] == ["A", None]
    bad = out[1]
    assert (bad.error.kind, bad.tie, bad.order_winners, bad.reason) == ("input", False, orders, bad.error.reason)
    assert "lone surrogate" in bad.reason and not bad.reason.startswith("item")


def test_a_batch_of_the_wrong_shape_raises_before_anything_is_judged() -> None:
    seen: list[GenerationRequest] = []
    judge = judge_by_rank({"good": 4}, seen=seen)
    with pytest.raises(InputError, match="responses has 1 items but instructions has 2"):
        judge.grade(["q", "q"], ["good"], "helpfulness")
    assert seen == []


def test_the_cascade_routes_only_the_items_that_were_built() -> None:
    primary = judge_by_rank({"good": 4})  # "odd" has no rank: no verdict, routed as failed
    fallback_seen: list[GenerationRequest] = []
    fallback = judge_by_rank({"odd": 2}, seen=fallback_seen)
    cascade = CascadeJudge(primary, fallback, threshold=1.0, indicator="sample_agreement")
    out = cascade.grade(["q", "q", "q"], ["good", None, "odd"], "helpfulness")
    assert [(g.score, g.decided_by) for g in out] == [(4.0, "primary"), (None, None), (2.0, "fallback")]
    assert out[1].error.kind == "input" and [r.reason for r in cascade.last_routing] == ["unscored", "failed"]
    assert [response_of(r) for r in fallback_seen] == ["good", "odd"]  # the bad item went to neither judge
    assert (cascade.cascade_stats.items, cascade.cascade_stats.routed) == (2, 2)
