"""The configuration canary of a reward (``prom_reward.core.canary``): one judgment before its first batch.

``PrometheusReward`` (TRL's GRPO and RLOO, and through ``judge_batch`` the OpenRLHF server, ``reward_func``
and verl) and ``OnlineDPOJudgeReward`` run the canary on their **first call**, not at construction: TRL
builds the trainer (and may pickle the reward into a child process) before any judge is up, and a
reward built from options builds its judge only on first use. The canary goes through the reward's
whole path (the guard, the mode, the judge, the backend), so what fails it would fail every sample:

- a misconfigured judge (``JudgeConfigError``: a wrong route, refused credentials, a model the server does
  not serve) raises from that first call: training stops with the URL, the cause and the fix;
- a judge that is not up yet is waited for within the reward's outage budget, like any call (a judge that
  comes up 8 s late is judged); when the budget runs out with ``on_exhausted="fail"`` the call goes on
  and the next one runs the canary again; with ``"raise"`` the call raises, as the batch itself would.

``reward-server`` runs the same canary before it serves (``integrations.startup.check_judge``).

Example:
    >>> from prom_reward.rewards.config import RewardConfig
    >>> [s.baseline for s in canary_samples(RewardConfig(mode="pairwise_reference"))]
    ['Hi.']
    >>> len(canary_samples(RewardConfig(mode="pairwise_group")))
    2
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prom_reward.core.canary import CANARY_INSTRUCTION, CANARY_RESPONSES, CANARY_RUBRIC, over_http
from prom_reward.core.verdict_probs import no_logprobs
from prom_reward.errors import JudgeConfigError
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.modes import ModeOutput
from prom_reward.rewards.samples import RewardSample

logger = logging.getLogger(__name__)


def canary_samples(config: RewardConfig) -> list[RewardSample]:
    """The canary as samples of ``config``'s mode (a pair of one prompt for ``pairwise_group``, a baseline
    for ``pairwise_reference``)."""
    first, second = CANARY_RESPONSES
    sample = RewardSample(prompt=CANARY_INSTRUCTION, response=first, rubric=CANARY_RUBRIC)
    if config.mode == "pairwise_group":
        return [sample, RewardSample(prompt=CANARY_INSTRUCTION, response=second, rubric=CANARY_RUBRIC)]
    if config.mode == "pairwise_reference":
        return [RewardSample(prompt=CANARY_INSTRUCTION, response=first, rubric=CANARY_RUBRIC, baseline=second)]
    return [sample]


def unanswered(judge_batch: Callable[..., ModeOutput], config: RewardConfig, deadline: float | None) -> str | None:
    """The canary of ``config``'s mode judged by a reward's ``judge_batch``: None when the judge answered it, else
    why not (the outage's cause). The reward hands this to ``CanaryGate.run``, so its module is not entered again
    on the stack of its own call."""
    out = judge_batch(canary_samples(config), deadline=deadline)
    if config.score == "expected" and config.mode == "absolute" and out.reasons and no_logprobs(out.reasons[0]):
        raise JudgeConfigError(f"score='expected': {out.reasons[0]} (the start-up check's grade)")
    return out.reasons[0] if out.metrics.get("outage_failures") else None


class CanaryGate:
    """Whether a reward still owes its canary, and running it once (see the module docstring).

    ``due`` is True for a judge behind an HTTP server (``core.canary.over_http``) until a canary was
    answered; an in-process or scripted judge owes none.
    """

    def __init__(self, judge: Any) -> None:
        self.due = over_http(judge)

    def run(self, judge_once: Callable[[], str | None]) -> str | None:
        """Run ``judge_once`` (the canary through the reward's path: None when the judge answered, else why
        not) if it is due; a ``JudgeConfigError`` it raises propagates. Returns why the judge did not answer."""
        if not self.due:
            return None
        self.due = False  # the canary's own batch must not run it again
        answered = False
        try:
            why = judge_once()
            answered = why is None
        finally:
            self.due = not answered
        if why is not None:
            logger.warning("canary judgment: the judge did not answer (%s); the next call runs it again", why)
        return why


__all__ = ["CanaryGate", "canary_samples", "unanswered"]
