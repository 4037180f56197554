"""The fault matrix (``tests.reward_faults``) of verl 0.9.1's reward path, driven by its own code: its
``RewardLoopWorker.compute_score_batch`` (the naive reward manager awaiting ``compute_score`` per sample) on the
documented explicit-URL launch of docs/verl.md, against a stand-in judge server; settings from
``PROM_REWARD_CONFIG``.

No case may crash the step or fail a healthy sample; a failure carries its reason in the reward extras; a judge
down past the budget gives the failure reward with the cause (``outage_on_exhausted=fail``) or, with
``outage_on_exhausted=raise`` (the default), raises out of verl's reward loop with the cause (the step stops).
"""

from __future__ import annotations

import math

import pytest
import verl  # noqa: F401 (a peer: tests.peers fails the run when it does not import)

from prom_reward.errors import ConfigError, JudgeConfigError, JudgeUnavailableError
from tests.integrations.test_openrlhf_server import PROMPT
from tests.integrations.test_verl_integration import (  # noqa: E402
    LAUNCHES,
    compose_config,
    fresh,  # noqa: F401 (autouse fixture: no PROM_REWARD_* settings leak in, verl's state reset)
    local,
    make_data,
)
from tests.reward_faults import CASES, FAILED, MISCONFIGURED, Case, check, settings_file


def verl_worker(tiny_model_dir):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    _, overrides = LAUNCHES["Judge servers of your own (explicit URL)"]
    return RewardLoopWorker(compose_config(local(overrides, tiny_model_dir)), reward_router_address=None)


def score_batch(worker, responses, truths, extra_infos=None) -> list[dict]:
    """verl's ``compute_score_batch`` over one batch of (response, ground truth) samples; ``extra_infos``: more
    ``extra_info`` keys per sample."""
    extra = extra_infos or [{}] * len(responses)
    samples = [
        {
            "prompt_text": PROMPT,
            "response": r,
            "ground_truth": t,
            "data_source": "d",
            "extra_info": {"question": PROMPT, "index": i, **extra[i]},
        }
        for i, (r, t) in enumerate(zip(responses, truths, strict=True))
    ]
    return worker.loop.run_until_complete(worker.compute_score_batch(make_data(worker.input_tokenizer, samples)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_verl_reward_loop(name, stand_in, tiny_model_dir, tmp_path, monkeypatch):
    case = CASES[name]
    judge = stand_in(case)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, case)))
    worker = verl_worker(tiny_model_dir)
    truths = ["4", math.nan, ""] if name == "poisoned" else [""] * len(case.responses)
    if case.stops:
        error, words = (
            (JudgeConfigError, MISCONFIGURED)
            if case.misconfigured
            else (JudgeUnavailableError, r"failing for .* outage budget .* 503")
        )
        with pytest.raises(error, match=words):
            score_batch(worker, case.responses, truths)
        assert not judge.graded  # nothing was judged (the misconfigured case: the canary stopped it first)
        return
    outputs = score_batch(worker, case.responses, truths)
    infos = [o["reward_extra_info"] for o in outputs]
    want = list(case.expected)
    if name == "poisoned":
        want = [5.0, FAILED, 5.0]  # the NaN ground truth fails its sample alone
        assert "ground_truth" in infos[1]["judge_failure_reason"]
    check(Case(expected=tuple(want)), [o["reward_score"] for o in outputs], [i["judge_failed"] for i in infos])
    assert len({tuple(sorted(i)) for i in infos}) == 1
    if name == "dead":
        assert all("failing for" in i["judge_failure_reason"] for i in infos)
    if name == "over_context":
        assert infos[1]["truncated_responses"] >= 1
    if name == "over_context_fail":
        assert "context" in infos[1]["judge_failure_reason"]


def test_a_judge_serving_another_model_stops_verls_first_score(stand_in, tiny_model_dir, tmp_path, monkeypatch):
    """Validation at start: a judge that answers but does not serve ``model`` is a configuration error on the
    first score, out of verl's reward loop (a judge that is down only warns: the ``late`` case)."""
    judge = stand_in(Case())
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, Case(), model="other")))
    with pytest.raises(ConfigError, match="does not serve the model 'other'.*stand-in-judge"):
        score_batch(verl_worker(tiny_model_dir), ["good"], [""])
    assert judge.chats == 0
