"""The configuration canary: one judgment through the whole path before a reward, server or job starts.

A judge server that answers but not as configured (a wrong route: the URL lacks ``/v1``; refused
credentials; a model it does not serve) fails every request alike: that is the configuration's fault,
not a sample's, and it raises ``JudgeConfigError`` where the reply is read (``backends/_openai_wire``).
So that it stops a run before the run starts, every reward server (``prom-reward reward-server``, through
``integrations.startup.check_judge``), reward (``PrometheusReward`` and ``OnlineDPOJudgeReward`` on their
first call, and so OpenRLHF's ``reward_func`` and verl's ``compute_score``, whose ``PrometheusReward`` runs
it in its first batch without holding up the samples of the other batches) and job (``grade``,
``compare``, ``pairs``, in ``jobs.run.run_job``) first judges the canary through its own path.

- ``JudgeConfigError`` (or any ``ConfigError``) from the canary is raised: the command exits 2 naming the
  URL, the cause and the fix; a reward raises it from its first call.
- A judge that is not up yet (refused connection, 5xx, a timeout) is not misconfigured: the path starts
  as it would without the canary (a reward waits for it within its outage budget; a server warns and
  probes it; a job's batches fail and are marked for ``--resume``).
- Only judges behind an HTTP server (``over_http``) have routes, keys and served model names to get
  wrong; an in-process engine loads its model or fails at construction, and a scripted judge has no
  configuration, so neither runs the canary (nor starts an engine or spends a scripted output for it).

Example:
    >>> over_http({"backend": "openai", "base_url": "http://judge:8000/v1"}), over_http({"model": "m"})
    (True, False)
"""

from __future__ import annotations

import logging
from typing import Any

from prom_reward.core.verdict_probs import no_logprobs
from prom_reward.errors import BackendError, JudgeConfigError

logger = logging.getLogger(__name__)

CANARY_INSTRUCTION = "Say hello in one word."
"""The canary's instruction."""
CANARY_RESPONSES = ("Hello!", "Hi.")
"""The canary's response (a pairwise canary compares the two)."""
CANARY_RUBRIC = "helpfulness"
"""The canary's rubric (a built-in one)."""


def over_http(judge: Any) -> bool:
    """Whether ``judge`` (a ``PrometheusJudge``, or a dict of its options) talks to an HTTP judge server."""
    if isinstance(judge, dict):
        return judge.get("backend") == "openai"
    from prom_reward.core.judge import PrometheusJudge

    return isinstance(judge, PrometheusJudge) and judge.backend.name == "openai"


def asks_expected(judge: Any) -> bool:
    """Whether ``judge`` (a ``PrometheusJudge``) asks for the verdict's logprobs (``expected_score=True``,
    ``--expected``): its grades carry expected scores."""
    from prom_reward.core.judge import EXPECTED_LOGPROBS

    return (judge.sampling.logprobs or 0) >= EXPECTED_LOGPROBS


def job_canary(judge: Any, expected: bool = False) -> str | None:
    """The canary of a job: one grade of ``CANARY`` by ``judge`` (a ``PrometheusJudge``; a verdict when its
    format is pairwise-only), when it talks to a server. Raises ``JudgeConfigError`` for a misconfigured judge,
    and, with ``expected`` (``grade --expected``: its rows' expected scores), for a server that returned no
    logprobs at all; returns why the judge did not answer (it is not up: the job goes on as without a canary), or
    None."""
    if not over_http(judge):
        return None
    try:
        if "absolute" in judge.format.tasks:  # a pairwise-only judge format compares the canary's two responses
            (grade,) = judge.grade([CANARY_INSTRUCTION], [CANARY_RESPONSES[0]], CANARY_RUBRIC)
            if expected and asks_expected(judge) and no_logprobs(grade.expected_reason):
                raise JudgeConfigError(f"--expected: {grade.expected_reason} (the start-up check's grade)")
        else:
            judge.compare([CANARY_INSTRUCTION], [CANARY_RESPONSES[0]], [CANARY_RESPONSES[1]], CANARY_RUBRIC)
    except BackendError as e:
        logger.warning("canary judgment: the judge is not answering (%s); starting anyway", e)
        return str(e)
    return None


__all__ = ["CANARY_INSTRUCTION", "CANARY_RESPONSES", "CANARY_RUBRIC", "job_canary", "over_http"]
