"""``outage=`` on a judge's calls (``rewards.outage.Outage``, what the jobs and the probe pass): the items the
transport failed are asked again by the outage policy. The answered items are kept and never asked again; a flaky
judge is waited out; past the budget ``fail`` leaves each item its transport failure and ``raise`` raises; list
forms, pairs and ``compare_by_grades`` go the same way; and a real ``OpenAIServer`` on 127.0.0.1 that answers 503
twice is waited out through the backend's one attempt per request."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest, GenerationResult
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.errors import BackendError, JudgeUnavailableError
from prom_reward.rewards.outage import Outage, OutagePolicy

FAST = OutagePolicy(budget_s=2.0, backoff_s=0.01, max_backoff_s=0.02, on_exhausted="fail")


TAGS = ("zq0", "zq1", "zq2", "zfirst", "zsecond", "zflaky", "zoka", "zokb", "zokc")
"""Words in the judged texts, in no judge prompt's template."""


class Flaky:
    """A scripted judge's answers: a prompt holding one of ``down`` fails on the transport its first ``fails``
    times (that request alone); ``asked`` counts the requests per tag (``TAGS``) of the prompt."""

    def __init__(self, down: tuple[str, ...], fails: int, text: str = "Fine. [RESULT] 4") -> None:
        self.down, self.fails, self.text = down, fails, text
        self.asked: Counter[str] = Counter()

    def __call__(self, request: GenerationRequest, i: int) -> str:
        for tag in (t for t in TAGS if t in request.user):
            self.asked[tag] += 1
        failing = [d for d in self.down if d in request.user]
        if failing and self.asked[failing[0]] <= self.fails:
            raise BackendError(f"HTTP 503 for {failing[0]}")
        return self.text


class PerRequest(ScriptedBackend):
    """A scripted backend whose failed request fails alone (as ``OpenAIServer``'s do)."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for r in requests:
            try:
                out.append(super().generate([r])[0])
            except BackendError as e:
                out.append(GenerationResult((), error=str(e)))
        return out


def judge_of(flaky: Flaky, policy: OutagePolicy = FAST) -> tuple[PrometheusJudge, Outage]:
    return PrometheusJudge(backend=PerRequest(respond=flaky), max_retries=0), Outage(policy)


def test_without_an_outage_a_call_judges_once():
    flaky = Flaky(down=("zq1",), fails=1)
    judge, _ = judge_of(flaky)
    grades = judge.grade(["zq0", "zq1"], ["A.", "A."], "helpfulness")
    assert [g.score for g in grades] == [4.0, None] and grades[1].error.kind == "transport"
    assert flaky.asked == {"zq0": 1, "zq1": 1}


def test_only_the_items_the_transport_failed_are_asked_again_until_answered():
    flaky = Flaky(down=("zq1",), fails=2)
    judge, outage = judge_of(flaky)
    items = [GradeItem(f"zq{i}", "A.", "helpfulness") for i in range(3)]
    grades = judge.grade_items(items, outage=outage)
    assert [g.score for g in grades] == [4.0, 4.0, 4.0] and all(g.error is None for g in grades)
    assert flaky.asked == {"zq0": 1, "zq1": 3, "zq2": 1}  # two failures, then answered; the others asked once
    assert outage.health.status()["status"] == "ok"


def test_past_the_budget_fail_keeps_each_items_transport_failure_and_the_answers():
    flaky = Flaky(down=("zq1",), fails=10**6)
    judge, outage = judge_of(flaky, OutagePolicy(budget_s=0.1, backoff_s=0.02, on_exhausted="fail"))
    grades = judge.grade(["zq0", "zq1", "zq2"], ["A.", "A.", "A."], "helpfulness", outage=outage)
    assert [g.score for g in grades] == [4.0, None, 4.0]
    assert grades[1].error.kind == "transport" and "HTTP 503 for zq1" in grades[1].error.reason
    assert flaky.asked["zq0"] == flaky.asked["zq2"] == 1 and flaky.asked["zq1"] >= 2
    assert outage.health.exhausted == 1


def test_past_the_budget_raise_stops_with_the_cause():
    judge, outage = judge_of(Flaky(down=("zq0",), fails=10**6), OutagePolicy(budget_s=0.05, backoff_s=0.02))
    with pytest.raises(JudgeUnavailableError, match="HTTP 503 for zq0"):
        judge.grade(["zq0"], ["A."], "helpfulness", outage=outage)


def test_an_item_that_fails_on_its_input_or_output_is_not_asked_again():
    flaky = Flaky(down=(), fails=0, text="no verdict here")
    judge, outage = judge_of(flaky)
    grades = judge.grade(["zq0", "zq1"], ["A.", 7], "helpfulness", outage=outage)  # type: ignore[list-item]
    assert grades[0].error.kind == "output" and grades[1].error.kind == "input"
    assert sum(flaky.asked.values()) == 1  # the output failure once (max_retries=0), the input one never sent


@pytest.mark.parametrize("swap", [False, True])
def test_pairs_are_asked_again_alike(swap: bool):
    flaky = Flaky(down=("zsecond",), fails=1, text="A is better. [RESULT] A")
    judge, outage = judge_of(flaky)
    pairs = [PairItem("Q?", f"{w} a", f"{w} b", "helpfulness") for w in ("zfirst", "zsecond")]
    verdicts = judge.compare_items(pairs, swap=swap, outage=outage)
    # the failed order asked again with the other order of its pair (an item is a pair): 2 requests a round
    assert all(v.error is None for v in verdicts) and flaky.asked["zsecond"] == (4 if swap else 2)


def test_compare_by_grades_asks_again_for_the_failed_grades_only():
    flaky = Flaky(down=("zflaky",), fails=1)
    judge, outage = judge_of(flaky)
    verdicts = judge.compare_by_grades(
        ["Q?", "Q?"], ["zoka", "zflaky"], ["zokb", "zokc"], "helpfulness", max_tie_rounds=0, outage=outage
    )
    assert all(v.error is None for v in verdicts)
    assert flaky.asked["zflaky"] == 2 and flaky.asked["zoka"] == flaky.asked["zokc"] == 1  # the failed grade, again


def test_a_real_server_answering_503_twice_is_waited_out(fake_server):
    from tests.jobs.helpers import chat

    answer = chat()

    def reply(k: int, body: dict):
        return (503, {"error": {"message": "engine loading"}}) if k <= 2 else answer(k, body)

    srv = fake_server({"/v1/chat/completions": reply})
    inner = PrometheusJudge(backend="openai", base_url=srv.url, model="judge", system_role=False, max_retries=0)
    outage = Outage(FAST)
    try:
        [grade] = inner.grade(["zq0"], ["A."], "helpfulness", outage=outage)
    finally:
        inner.close()
    assert grade.error is None and grade.score is not None
    assert len(srv.bodies("/v1/chat/completions")) == 3  # one attempt per call: the policy asked twice more
    assert json.dumps(outage.health.status()).count('"ok"') == 1


def test_lists_of_different_lengths_get_the_judges_own_error():
    from prom_reward.errors import InputError

    judge, outage = judge_of(Flaky(down=(), fails=0))
    with pytest.raises(InputError):
        judge.compare_by_grades(["Q?", "Q?"], ["a", "b"], ["c"], "helpfulness", outage=outage)
    with pytest.raises(InputError):
        judge.grade(["Q?", "Q?"], ["a"], "helpfulness", outage=outage)
