"""The fault cases every reward path is driven through, with the framework's own code, against a stand-in
judge server (``tests.fakes.StandInJudge``, real HTTP on 127.0.0.1; the ``stand_in`` fixture of conftest.py
starts one misbehaving as a ``Case`` says).

Used by tests/integrations/test_reward_faults.py (OpenRLHF 0.11.2: reward server and in-process
``reward_func``), tests/integrations/test_reward_faults_verl.py (verl 0.9.1's reward loop) and
tests/rewards/test_reward_faults_trl.py (TRL 1.16: GRPO and RLOO ``_calculate_rewards``, online DPO's
``_calculate_rewards_from_functions``). The cases:

- ``poisoned``: one sample with a lone surrogate (and, where labels exist, a NaN label) among good ones;
- ``over_context``: a 60 KB response, over the stand-in's 4,096-token context: shortened and judged (the
  default ``over_context="truncate"``); ``over_context_fail``: the same with ``over_context="fail"``: that
  sample alone fails;
- ``outage``: the judge answers 503 for a while, then recovers (for the OpenRLHF paths longer than
  OpenRLHF's own retry window of five tries a second apart);
- ``dead``: the judge never answers, past the outage budget: the failure reward with the cause
  (``outage_on_exhausted=fail``); ``dead_raise``: the same with ``outage_on_exhausted=raise``: training stops
  with the cause;
- ``hung``: the first judge call never answers: it is cut by the call timeout and retried;
- ``late``: the judge starts listening only after the first samples arrive;
- ``misconfigured``: the judge answers 404 on every API route (a URL without ``/v1``): the configuration
  canary stops the path at its start (or first call) with ``JudgeConfigError`` naming the URL and the fix,
  never a failure reward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

GRADES = {"good": 5, "fair": 2}
"""The stand-in's grade by a response's first word (anything else: 3)."""
LONG = "long " + "x" * 60_000
FAILED = -1.0
"""The failure reward of the settings; in ``Case.expected``: the sample fails (flagged, with its reason)."""
OPENRLHF_RETRY_WINDOW_S = 5.0
"""OpenRLHF's client: five tries, a second apart (``_fetch_rewards_via_http``)."""
JUDGE_OPTIONS = {"system_role": False, "max_retries": 0}
"""The judge's options in every path: no re-sampling (the transport makes one attempt per call: what a dead judge
costs is the outage policy's waits, what the cases check)."""


@dataclass
class Case:
    """A fault: how the stand-in judge misbehaves, the settings it is met with, the samples and what must come back."""

    judge: dict = field(default_factory=dict)
    late: float = 0.0
    settings: dict = field(default_factory=dict)
    """``RewardSettings`` fields (the TRL paths map them onto ``RewardConfig`` / ``OutagePolicy``)."""
    responses: tuple[str, ...] = ("good", "fair")
    labels: tuple = (None, None)
    expected: tuple = (5.0, 2.0)
    """Per sample: the reward, or FAILED (the failure reward, flagged judge_failed)."""
    stops: bool = False
    """Training must stop with the cause (nothing is rewarded)."""
    misconfigured: bool = False
    """It stops on a configuration failure (``JudgeConfigError``), not an outage."""


DEAD = {"down_for": None}
CASES = {
    "poisoned": Case(
        responses=("good", "fair", "good"),
        labels=(None, {"reference_answer": "bad \ud800"}, math.nan),
        expected=(5.0, FAILED, FAILED),
    ),
    "over_context": Case(responses=("good", LONG, "fair"), labels=(None, None, None), expected=(5.0, 3.0, 2.0)),
    "over_context_fail": Case(
        settings={"over_context": "fail"},
        responses=("good", LONG, "fair"),
        labels=(None, None, None),
        expected=(5.0, FAILED, 2.0),
    ),
    "outage": Case(judge={"down_for": 1.5}),
    "dead": Case(
        judge=DEAD, settings={"outage_budget_s": 1.0, "outage_on_exhausted": "fail"}, expected=(FAILED, FAILED)
    ),
    "dead_raise": Case(judge=DEAD, settings={"outage_budget_s": 1.0, "outage_on_exhausted": "raise"}, stops=True),
    "hung": Case(
        judge={"hang_first": 1},
        settings={"outage_call_timeout_s": 1.0},
        responses=("good", "fair", "good"),
        labels=(None, None, None),
        expected=(5.0, 2.0, 5.0),
    ),
    "late": Case(late=1.5),
    "misconfigured": Case(judge={"refuse": 404}, stops=True, misconfigured=True),
}
MISCONFIGURED = r"HTTP 404 .* not the server's OpenAI-compatible API; fix: .*/v1"
"""What a misconfigured judge's error says (the URL, the cause, the fix)."""


def settings_values(url: str, case: Case) -> dict:
    """The case's ``RewardSettings`` values."""
    return {
        "server": url,
        "failure_reward": FAILED,
        "batch_window_ms": 100,
        "max_tokens": 32,
        "outage_budget_s": 20.0,
        "request_timeout": 60.0,
        "judge": dict(JUDGE_OPTIONS),
        **case.settings,
    }


def settings_file(tmp_path: Path, url: str, case: Case, **more) -> Path:
    """The case's settings as the YAML file every framework path reads (``PROM_REWARD_CONFIG``)."""
    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump({**settings_values(url, case), **more}))
    return path


def check(case: Case, rewards: list[float], failed: list[float]) -> None:
    """The rewards and ``judge_failed`` flags are what ``case.expected`` says."""
    assert len(rewards) == len(case.expected) == len(failed)
    for got, flag, want in zip(rewards, failed, case.expected, strict=True):
        assert got == want, (rewards, case.expected)
        assert flag == float(want == FAILED), (failed, case.expected)
