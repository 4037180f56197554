"""The start-up check of a reward, reward server or job: is the judge there (``GET /models``), does it serve the
model asked for, and does the run's own judgment (the canary: its format, task and rubric) go through? A wrong
answer raises ``JudgeConfigError``; a judge that does not answer only warns and is probed until it does."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prom_reward.backends._openai_http import EndpointPool, HTTPBatch
from prom_reward.backends._openai_wire import context_of, model_ids
from prom_reward.backends._sessions import new_session
from prom_reward.backends.base import JudgeServer
from prom_reward.backends.bridge import sync_method
from prom_reward.checklist.criteria import Criterion, criterion_rubric
from prom_reward.core.judge import PrometheusJudge, asks_expected
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.core.sampler import no_logprobs
from prom_reward.errors import BackendError, ConfigError, JudgeConfigError, JudgeUnavailableError
from prom_reward.format.judge_format import JudgeFormat, Task
from prom_reward.format.rubrics import Rubric
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.modes import ModeOutput, assemble, batch_runner
from prom_reward.rewards.outage import JudgeHealth, OutagePolicy, ajudge_until_answered
from prom_reward.rewards.samples import RewardSample

logger = logging.getLogger(__name__)

CANARY_INSTRUCTION = "Say hello in one word."
CANARY_RESPONSES = ("Hello!", "Hi.")  # the canary's response (a pairwise canary compares the two)
CANARY_CRITERION = "the response answers the instruction"  # its rubric's question when rows bring their own
_probes: set[asyncio.Task[None]] = set()  # probes running, held until done


@dataclass
class JudgeCheck:
    """What ``acheck_judge`` found."""

    reachable: dict[str, bool] = field(default_factory=dict)  # per URL: did ``GET /models`` answer?
    models: dict[str, list[str]] = field(default_factory=dict)  # per reachable URL: the served model ids
    probing: asyncio.Task[None] | None = None  # the probe of the URLs that did not answer yet, on the check's loop


async def _ask(url: str, timeout: float, api_key: str | None, model: str | None) -> tuple[list[str] | None, Any]:
    """(served model ids, the context length of ``model``, else of the first) when ``url`` answers ``GET /models``
    within ``timeout`` s; (None, why) when it does not. A refused key raises ``JudgeConfigError``
    (``_openai_wire.rejection``)."""

    def served(data: Any) -> tuple[list[str], int | None]:
        ids = model_ids(data)
        return ids, context_of(data, model or ids[0]) if ids else None

    async with new_session(api_key=api_key, timeout=timeout) as session:
        try:
            return await HTTPBatch(EndpointPool([url.rstrip("/")]), session, 1, timeout, None).call(
                "GET", "/models", parse=served
            )
        except JudgeConfigError as e:
            if e.status != 404:
                raise
        except BackendError as e:
            return None, str(e)
    logger.warning("judge %s has no GET /models (not an OpenAI-compatible server?); the model name is not checked", url)
    return [], None


async def acheck_judge(
    server: JudgeServer | None,
    *,
    reward: Any = None,
    canary: bool = True,
    outage: OutagePolicy | None = None,
    timeout: float = 5.0,
    health: JudgeHealth | None = None,
    probe_every: float = 10.0,
    canary_timeout: float = 120.0,
    on_misconfigured: Callable[[str], None] | None = None,
) -> JudgeCheck:
    """Ask every URL of ``server`` (None: an in-process judge, nothing to ask) for its models with its key, once:
    the first reply names ``reward``'s served model and context length (``PrometheusReward.served``); then run its
    canary (unless not ``canary``). A URL down is probed every ``probe_every`` s (``JudgeCheck.probing``).
    ``outage``: what the samples meet meanwhile (the reward's policy by default), said in the warning."""
    check = JudgeCheck()
    urls, model, api_key = (server.urls, server.model, server.api_key) if server is not None else ((), None, None)
    policy = outage if outage is not None else reward.config.outage if reward is not None else None
    health = health if health is not None else reward.health if reward is not None else None
    down = dict.fromkeys(urls, "")

    async def ask(late: bool) -> None:
        for url in list(down):
            del down[url]
            served, said = await _ask(url, timeout, api_key, model)
            check.reachable[url] = served is not None
            if served is None:
                down[url] = said
                continue
            check.models[url] = served
            if model and served and model not in served:
                raise JudgeConfigError(
                    f"judge {url} does not serve the model {model!r} (it serves {', '.join(served)}); fix: set "
                    "model (--model / PROM_REWARD_MODEL) to one of those, or leave it unset to use the first",
                    url=url,
                )
            if reward is not None and served:
                reward.served(served[0], said)
            if late:
                logger.warning("judge %s is answering now (serves %s)", url, ", ".join(served) or "?")
        if not down and urls and canary and reward is not None:
            try:
                why = await reward.acheck_configuration(deadline=time.monotonic() + canary_timeout)
            except (BackendError, JudgeUnavailableError) as e:  # not up (on_exhausted="raise"), not misconfigured
                why = str(e)
            if why is not None:  # a judge that does not answer the canary only warns
                logger.warning("judge did not answer the canary judgment (%s); starting anyway", why)
                if health is not None:
                    health.failed(f"canary judgment not answered at start: {why}")

    async def probe_until_up() -> None:
        wrong = False
        while down:
            await asyncio.sleep(probe_every)
            try:
                await ask(late=True)
            except ConfigError as e:
                logger.error("%s", e)
                wrong = True
                if health is not None:
                    health.failed(str(e))
                if on_misconfigured is not None:
                    on_misconfigured(str(e))
        if not wrong and health is not None:
            health.succeeded()

    await ask(late=False)
    then = "meet its on_exhausted" if policy is None else "get the failure reward"  # what the samples meet meanwhile
    if policy is not None and policy.on_exhausted == "raise":
        then = "their request fails with JudgeUnavailableError naming the cause (outage on_exhausted raise: "
        then += "reward-server answers it 503); on_exhausted fail would give them the failure reward instead"
    budget = f" ({policy.budget_s:g} s)" if policy is not None else ""
    meanwhile = (
        f"starting anyway and probing it every {probe_every:.0f} s; until it answers, samples wait within the outage "
        f"budget{budget}, then {then}"
    )
    for url, why in down.items():
        logger.warning("judge %s is not answering (%s); %s", url, why, meanwhile)
        if health is not None:
            health.failed(f"judge {url} not answering at start: {why}")
    if down:
        check.probing = asyncio.get_running_loop().create_task(probe_until_up(), name="prom-reward-judge-probe")
        _probes.add(check.probing)
        check.probing.add_done_callback(_probes.discard)
    return check


check_judge = sync_method(acheck_judge)  # on the library's loop, where its probe goes on after it returns


def over_http(judge: Any) -> bool:
    """Whether ``judge`` (a ``PrometheusJudge``, its ``JudgeSpec`` or a dict of its options) talks to an HTTP judge
    server."""
    if isinstance(judge, (dict, JudgeSpec)):
        return (JudgeSpec.of(judge) if isinstance(judge, dict) else judge).backend == "openai"
    return isinstance(judge, PrometheusJudge) and judge.backend.name == "openai"


def canary_rubric(fmt: JudgeFormat, task: Task, rubric: Rubric | None) -> Rubric:
    """The canary's rubric: the run's ``rubric`` for every row, else one on ``fmt``'s scale for ``task``."""
    if rubric is not None:
        return rubric
    criterion = Criterion(CANARY_CRITERION)
    if task == "absolute" and 2 <= len(fmt.scale) <= 5:
        return criterion_rubric(criterion, fmt)
    return Rubric(f"Does the response satisfy this criterion: {criterion.text}?")


def job_canary(judge: Any, task: Task, rubric: Rubric | None, expected: bool = False) -> str | None:
    """The canary of a job asking ``judge`` for ``task`` with ``rubric`` (None: each row's), when it talks to a
    server. Raises ``JudgeConfigError`` for a misconfigured judge (with ``expected``, also for a server that returns
    no logprobs); returns why the judge did not answer, or None."""
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


async def judge_canary(
    judge: Any, config: RewardConfig, rubric: Rubric, deadline: float | None, health: JudgeHealth
) -> str | None:
    """The canary of ``config``'s mode with ``rubric``, through the reward's outage loop and mode: None when the
    judge answered it, else why not. Raises for a misconfigured judge (``score='expected'``: without logprobs)."""
    first, second = CANARY_RESPONSES
    samples = [RewardSample(CANARY_INSTRUCTION, first, config.reference_answer, rubric, CANARY_INSTRUCTION)]
    if config.mode == "pairwise_group":
        samples.append(dataclasses.replace(samples[0], response=second))
    elif config.mode == "pairwise_reference":
        samples[0] = dataclasses.replace(samples[0], baseline=second)
    units = [list(range(len(samples)))]
    run = batch_runner(judge, config, samples)
    iso = await ajudge_until_answered(
        units, run, ModeOutput.item_errors, config.outage, deadline=deadline, health=health
    )
    if iso.outage:
        return next(iter(iso.outage.values()))
    error = (assemble(len(samples), iso.parts).errors or [None])[0]
    if config.score == "expected" and config.mode == "absolute" and error is not None and no_logprobs(error.reason):
        raise JudgeConfigError(f"score='expected': {error.reason} (the start-up check's grade)")
    return None


class CanaryGate:
    """Whether a reward still owes its canary (a judge behind an HTTP server, until one was answered)."""

    def __init__(self, judge: Any) -> None:
        self.due = over_http(judge)

    async def run(self, judgment: Callable[[], Awaitable[str | None]]) -> str | None:
        """Await ``judgment()`` (the canary: None when answered, else why not) if it is due; returns why not."""
        if not self.due:
            return None
        self.due = False  # the canary's own batch must not run it again
        why: str | None = "it raised"
        try:
            why = await judgment()
        finally:
            self.due = why is not None
        if why is not None:
            logger.warning("canary judgment: the judge did not answer (%s); the next call runs it again", why)
        return why
