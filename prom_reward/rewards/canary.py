"""The configuration canary: one judgment through the whole path before a reward, server or job starts.

A judge server that answers but not as configured (a wrong route: the URL lacks ``/v1``; refused
credentials; a model it does not serve) fails every request alike: that is the configuration's fault,
not a sample's, and it raises ``JudgeConfigError`` where the reply is read (``backends/_openai_wire``).
So that it stops a run before the run starts, every job (``grade``, ``compare``, ``pairs``: ``job_canary`` in
``jobs.run.run_job``), reward (``PrometheusReward`` and ``OnlineDPOJudgeReward`` on their **first call**, not
at construction: TRL builds the trainer, and may pickle the reward into a child process, before any judge is
up) and reward server (``prom-reward reward-server``, verl, ``reward_func``, verifiers: after
``integrations.startup.check_judge`` asked each URL for its models) first judges the canary through its own
path.

The canary is the run's own judgment: the judge's format, the task the run asks of it (a grade, or a verdict
for a pairwise job, reward mode or online DPO; a pairwise-only format compares) and the run's rubric for every
row (``canary_rubric``). A run whose rows each bring their own rubric (a rubric column) or checklist is checked
with a rubric on the format's scale, the binary rubric a checklist criterion gets there
(``checklist.criteria.criterion_rubric``): a row's own rubric is the row's to fit, and a row that does not fit
fails alone, while the canary checks what every row shares (the route, the key, the model, the format).

- ``JudgeConfigError`` (or any ``ConfigError``) from the canary is raised: the command exits 2 naming the
  URL, the cause and the fix; a reward raises it from its first call.
- A judge that is not up yet (refused connection, 5xx, a timeout) is not misconfigured: the path starts
  as it would without the canary (a reward waits for it within its outage budget, and with
  ``on_exhausted="fail"`` the next call runs the canary again; a server warns and probes it; a job's batches
  fail and are marked for ``--resume``).
- Only judges behind an HTTP server (``over_http``) have routes, keys and served model names to get
  wrong; an in-process engine loads its model or fails at construction, and a scripted judge has no
  configuration, so neither runs the canary (nor starts an engine or spends a scripted output for it).

Example:
    >>> from prom_reward.format.judge_format import get_judge_format
    >>> len(canary_rubric(get_judge_format("flow-judge-3"), "absolute", None).descriptions)
    3
    >>> from prom_reward.rewards.config import RewardConfig
    >>> [s.baseline for s in canary_samples(RewardConfig(mode="pairwise_reference"), None)]
    ['Hi.']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prom_reward.checklist.criteria import Criterion, criterion_rubric
from prom_reward.core.verdict_probs import no_logprobs
from prom_reward.errors import BackendError, JudgeConfigError
from prom_reward.format.judge_format import JudgeFormat, Task
from prom_reward.format.rubrics import Rubric
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.modes import ModeOutput
from prom_reward.rewards.samples import RewardSample

logger = logging.getLogger(__name__)

CANARY_INSTRUCTION = "Say hello in one word."
"""The canary's instruction."""
CANARY_RESPONSES = ("Hello!", "Hi.")
"""The canary's response (a pairwise canary compares the two)."""
CANARY_CRITERION = "the response answers the instruction"
"""The question of the canary's rubric when the run has no rubric for every row."""


def over_http(judge: Any) -> bool:
    """Whether ``judge`` (a ``PrometheusJudge``, or a dict of its options) talks to an HTTP judge server."""
    if isinstance(judge, dict):
        return judge.get("backend") == "openai"
    from prom_reward.core.judge import PrometheusJudge

    return isinstance(judge, PrometheusJudge) and judge.backend.name == "openai"


def canary_rubric(fmt: JudgeFormat, task: Task, rubric: Rubric | None) -> Rubric:
    """The rubric the canary of a run in ``fmt`` asking for ``task`` is judged with: the run's ``rubric`` for every
    row, else one on ``fmt``'s scale (see the module docstring)."""
    if rubric is not None:
        return rubric
    criterion = Criterion(CANARY_CRITERION)
    if task == "absolute" and 2 <= len(fmt.scale) <= 5:
        return criterion_rubric(criterion, fmt)
    return Rubric(f"Does the response satisfy this criterion: {criterion.text}?")


def asks_expected(judge: Any) -> bool:
    """Whether ``judge`` (a ``PrometheusJudge``) asks for the verdict's logprobs (``expected_score=True``,
    ``--expected``): its grades carry expected scores."""
    from prom_reward.core.judge import EXPECTED_LOGPROBS

    return (judge.sampling.logprobs or 0) >= EXPECTED_LOGPROBS


def job_canary(judge: Any, task: Task, rubric: Rubric | None, expected: bool = False) -> str | None:
    """The canary of a job asking ``judge`` (a ``PrometheusJudge``) for ``task`` with ``rubric`` (the job's for
    every row; None: each row's), when it talks to a server. Raises ``JudgeConfigError`` for a misconfigured judge,
    and, with ``expected`` (``grade --expected``), for a server that returned no logprobs at all; returns why the
    judge did not answer (it is not up: the job goes on as without a canary), or None."""
    if not over_http(judge):
        return None
    judged = canary_rubric(judge.format, task, rubric)
    try:
        if task == "absolute":
            (grade,) = judge.grade([CANARY_INSTRUCTION], [CANARY_RESPONSES[0]], judged)
            if expected and asks_expected(judge) and no_logprobs(grade.expected_reason):
                raise JudgeConfigError(f"--expected: {grade.expected_reason} (the start-up check's grade)")
        else:
            judge.compare([CANARY_INSTRUCTION], [CANARY_RESPONSES[0]], [CANARY_RESPONSES[1]], judged)
    except BackendError as e:
        logger.warning("canary judgment: the judge is not answering (%s); starting anyway", e)
        return str(e)
    return None


def canary_samples(config: RewardConfig, rubric: Rubric) -> list[RewardSample]:
    """The canary as samples of ``config``'s mode judged with ``rubric`` (a pair of one prompt for
    ``pairwise_group``, a baseline for ``pairwise_reference``)."""
    first, second = CANARY_RESPONSES
    sample = RewardSample(prompt=CANARY_INSTRUCTION, response=first, rubric=rubric)
    if config.mode == "pairwise_group":
        return [sample, RewardSample(prompt=CANARY_INSTRUCTION, response=second, rubric=rubric)]
    if config.mode == "pairwise_reference":
        return [RewardSample(prompt=CANARY_INSTRUCTION, response=first, rubric=rubric, baseline=second)]
    return [sample]


def unanswered(
    judge_batch: Callable[..., ModeOutput], config: RewardConfig, rubric: Rubric, deadline: float | None
) -> str | None:
    """The canary of ``config``'s mode with ``rubric`` judged by a reward's ``judge_batch``: None when the judge
    answered it, else why not (the outage's cause). The reward hands this to ``CanaryGate.run``, so its module is
    not entered again on the stack of its own call."""
    out = judge_batch(canary_samples(config, rubric), deadline=deadline)
    if config.score == "expected" and config.mode == "absolute" and out.reasons and no_logprobs(out.reasons[0]):
        raise JudgeConfigError(f"score='expected': {out.reasons[0]} (the start-up check's grade)")
    return out.reasons[0] if out.metrics.get("outage_failures") else None


class CanaryGate:
    """Whether a reward still owes its canary, and running it once (see the module docstring).

    ``due`` is True for a judge behind an HTTP server (``over_http``) until a canary was answered; an in-process
    or scripted judge owes none.
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


__all__ = [
    "CANARY_CRITERION",
    "CANARY_INSTRUCTION",
    "CANARY_RESPONSES",
    "CanaryGate",
    "asks_expected",
    "canary_rubric",
    "canary_samples",
    "job_canary",
    "over_http",
    "unanswered",
]
