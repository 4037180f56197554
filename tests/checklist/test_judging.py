"""Judging a batch of (response, checklist) with a scripted judge whose per-criterion verdicts are known: the
aggregate exact, all judgments in one judge call, duplicates across completions judged once, a second epoch
answered by the judgment store, implicit mode one judgment per response, expected scores."""

from __future__ import annotations

import re

import pytest

from prom_reward.backends.base import Completion, GenerationRequest, TokenLogprobs
from prom_reward.backends.bridge import run_sync
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.checklist.aggregate import ChecklistConfig, checklist_config
from prom_reward.checklist.criteria import parse_checklist
from prom_reward.checklist.judging import ajudge_checklists
from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import ConfigError
from tests.judges import NO_VERDICT, response_of

CHECKLIST = [
    {"criterion": "States the answer 4", "category": "essential", "weight": 2},
    {"criterion": "Shows the work", "weight": 1},
    {"criterion": "Insults the user", "category": "pitfall", "weight": 1},
]
# the judge's verdict per (response, criterion): a 1..5 grade, or None for no verdict
VERDICTS = {
    ("4, since 2+2=4.", "States the answer 4"): 5,
    ("4, since 2+2=4.", "Shows the work"): 5,
    ("4, since 2+2=4.", "Insults the user"): 1,
    ("4, obviously, idiot.", "States the answer 4"): 5,
    ("4, obviously, idiot.", "Shows the work"): 1,
    ("4, obviously, idiot.", "Insults the user"): 5,
    ("5", "States the answer 4"): None,
    ("5", "Shows the work"): 2,
    ("5", "Insults the user"): 1,
    ("four", "States the answer 4"): 4,
    ("four", "Shows the work"): None,
    ("four", "Insults the user"): 2,
}
IMPLICIT = {"4, since 2+2=4.": 5, "4, obviously, idiot.": 2, "5": None}


def criterion_of(request: GenerationRequest) -> str | None:
    m = re.search(r"\[Does the response (?:satisfy this criterion|fall into this pitfall): (.*?)\?\]", request.user)
    return m.group(1) if m else None


def scripted(seen: list[GenerationRequest], **options) -> PrometheusJudge:
    def respond(request: GenerationRequest, i: int) -> str:
        seen.append(request)
        response, criterion = response_of(request), criterion_of(request)
        score = VERDICTS.get((response, criterion)) if criterion else IMPLICIT.get(response)
        return NO_VERDICT if score is None else f"Judged. [RESULT] {score}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0, **options)


def judge_all(judge, responses, cfg: ChecklistConfig | None = None):
    cfg = cfg or ChecklistConfig()
    lists = [parse_checklist(CHECKLIST, row=i) for i in range(len(responses))]
    return run_sync(lambda: ajudge_checklists(judge, ["What is 2+2?"] * len(responses), responses, lists, cfg))


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        # weighted mean over Q = {essential w2, shows w1}, pitfall w1 subtracting; scores (s-1)/4
        ("weighted_mean", [(2 * 1 + 1 * 1 - 0) / 3, (2 * 1 + 0 - 1) / 3, None, (2 * 0.75 - 0.25) / 2]),
        ("minimum", [1.0, 0.0, None, 0.75]),
        ("gate", [(1 - 0) / 1, (0 - 1) / 1, None, 1 - 0.25]),  # rest = {shows, pitfall}; "four": shows dropped
    ],
)
def test_explicit_mode_aggregates_each_responses_criteria_exactly(how, expected):
    seen: list[GenerationRequest] = []
    judge = scripted(seen)
    out = judge_all(judge, ["4, since 2+2=4.", "4, obviously, idiot.", "5", "four"], ChecklistConfig(aggregation=how))
    assert [o.aggregate.value for o in out.outcomes] == pytest.approx(expected)
    assert len(judge.backend.calls) == 1 and len(seen) == 12  # every judgment in one call
    failed = out.outcomes[2]
    assert failed.aggregate.reason.startswith("essential criterion 0 ('States the answer 4') could not be judged")
    assert failed.error is not None and failed.error.kind == "output"
    assert out.outcomes[3].aggregate.dropped == 1
    assert [c.satisfied for c in out.outcomes[1].criteria] == [True, False, True]
    assert out.metrics["checklist_dropped_criteria"] == 1.0
    assert out.metrics["checklist_undecided_rate"] == 2 / 12
    # passes: essential 3/3, shows 1/3 (2 judged... "four" undecided), pitfall avoided 3/4
    assert out.metrics["checklist_essential_pass_rate"] == 1.0
    assert out.metrics["checklist_important_pass_rate"] == pytest.approx(1 / 3)
    assert out.metrics["checklist_pitfall_pass_rate"] == pytest.approx(3 / 4)
    assert out.metrics["checklist/Shows_the_work_pass_rate"] == pytest.approx(1 / 3)
    assert out.metrics["checklist_pass_rate"] == pytest.approx(7 / 10)
    assert out.outcomes[1].feedback.splitlines() == ["[0] satisfied: Judged.", "[1] not satisfied: Judged.",
                                                     "[2] fell into: Judged."]  # fmt: skip


def test_duplicates_across_completions_are_judged_once():
    seen: list[GenerationRequest] = []
    out = judge_all(scripted(seen), ["4, since 2+2=4.", "4, since 2+2=4.", "four", "4, since 2+2=4."])
    assert len(seen) == 6  # 2 distinct responses x 3 criteria
    assert out.metrics["checklist_judgments"] == 6.0
    assert out.outcomes[0] == out.outcomes[1] == out.outcomes[3]


def test_a_second_epoch_asks_the_store_not_the_judge(tmp_path):
    store = tmp_path / "judgments.sqlite"
    seen: list[GenerationRequest] = []
    responses = ["4, since 2+2=4.", "4, obviously, idiot."]
    first = judge_all(scripted(seen, store=store), responses)
    assert len(seen) == 6
    again: list[GenerationRequest] = []
    judge = scripted(again, store=store)
    second = judge_all(judge, responses)
    assert again == []  # nothing new asked
    assert [o.aggregate.value for o in second.outcomes] == [o.aggregate.value for o in first.outcomes]


def test_implicit_mode_asks_one_judgment_per_response_against_the_whole_checklist():
    seen: list[GenerationRequest] = []
    out = judge_all(scripted(seen), ["4, since 2+2=4.", "4, obviously, idiot.", "5"], ChecklistConfig(mode="implicit"))
    assert len(seen) == 3
    assert "(1) [essential, weight 2] States the answer 4" in seen[0].user
    assert "(3) [must avoid, weight 1] Insults the user" in seen[0].user
    assert [o.aggregate.value for o in out.outcomes] == [1.0, 0.25, None]
    assert out.outcomes[2].aggregate.reason and out.outcomes[2].error.kind == "output"
    assert all(o.criteria == () for o in out.outcomes)


def _with_probs(probs: dict[str, float]) -> Completion:
    """An output whose verdict token carries ``probs`` (top logprobs), for expected scores."""
    import math

    top = {k: math.log(v) for k, v in probs.items()}
    tokens = (TokenLogprobs(" ", -0.1, {}), TokenLogprobs("5", top["5"], top))
    return Completion("Judged. [RESULT] 5", logprobs=tokens, finish_reason="stop", completion_tokens=4)


def test_expected_scores_feed_the_aggregation_when_asked():
    probs = {"4": 0.5, "5": 0.5}  # expected 4.5 -> (4.5 - 1) / 4 on [0, 1]
    judge = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: _with_probs(probs)), max_retries=0)
    lists = [parse_checklist(["Says 4"])]
    cfg = ChecklistConfig(score="expected")
    out = run_sync(lambda: ajudge_checklists(judge, ["2+2?"], ["4"], lists, cfg))
    assert out.outcomes[0].criteria[0].raw == pytest.approx(4.5)
    assert out.outcomes[0].aggregate.value == pytest.approx(3.5 / 4)
    assert judge.backend.calls[0][0].sampling.logprobs == 20


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "both"}, "mode: expected one of explicit, implicit"),
        ({"aggregation": "median"}, "aggregation: unknown checklist aggregation 'median'"),
        ({"score": "max"}, "score: expected one of sample, mean, expected"),
        ({"num_samples": 0}, "num_samples: expected an int >= 1"),
    ],
)
def test_checklist_config_is_validated(options, message):
    """Each field is named as it is given: ``mode`` here, ``checklist_mode`` in a job's or a reward's settings."""
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        ChecklistConfig(**options)
    given = {"mode": "explicit", "aggregation": "weighted_mean", **options}
    with pytest.raises(
        ConfigError,
        match="^"
        + re.escape(message.replace("mode", "checklist_mode", 1).replace("aggregation:", "checklist_aggregation:", 1)),
    ):
        checklist_config(**given)
