"""Start-up checks of a reward path: is the judge there, does it serve the model we asked for, and does
one judgment go through?

``prom-reward reward-server`` runs ``check_judge`` before it serves (and OpenRLHF's ``reward_func`` and
verl's ``compute_score`` on their first call, without the canary: their reward runs it in its first batch),
after ``RewardSettings`` validated the settings (rubric, failure reward on the reward's scale, modes, numbers):

- every judge URL is asked ``GET /models``; a URL that answers but does not serve ``model``, or
  refuses the API key, is a ``ConfigError`` (the command exits 2 with the reason, before serving);
- then, given the ``reward``, the configuration canary (``prom_reward.rewards.canary``): one judgment through
  the reward's whole path; a misconfigured judge (a wrong route: the URL lacks ``/v1``; refused
  credentials; a model it does not serve) raises ``JudgeConfigError``, which names the URL and the fix;
- a URL that does not answer (down, 5xx, still loading) is not misconfigured and only warns: the reward
  path starts anyway, marks the judge "degraded" in its ``JudgeHealth`` (``/health``), and a background
  thread keeps probing until it answers, then checks the model name and runs the canary the same way; a
  configuration failure found then is logged as an error and reported to ``on_misconfigured`` (the reward
  server's ``/health`` then says "failing").

Example:
    >>> check_judge(None).reachable
    {}
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from prom_reward.backends.base import JudgeServer
from prom_reward.errors import BackendError, ConfigError, JudgeConfigError, JudgeUnavailableError
from prom_reward.rewards.outage import JudgeHealth, OutagePolicy

logger = logging.getLogger(__name__)


@dataclass
class JudgeCheck:
    """What ``check_judge`` found."""

    reachable: dict[str, bool] = field(default_factory=dict)
    """Per URL: did ``GET /models`` answer?"""
    models: dict[str, list[str]] = field(default_factory=dict)
    """Per reachable URL: the served model ids."""
    probing: threading.Thread | None = None
    """The background prober, while some URL has not answered yet."""


def _get(url: str, timeout: float, api_key: str | None) -> tuple[int, bytes]:
    """``GET url`` with the run's key: (status, body), the whole reply within ``timeout`` seconds (httpx's timeout is
    per read: a judge trickling its reply a byte at a time would hold the start-up forever)."""
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.stream("GET", url, timeout=timeout, headers=headers) as r:
        body = bytearray()
        for chunk in r.iter_bytes():
            body += chunk
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"no whole reply within {timeout:g} s", request=r.request)
        return r.status_code, bytes(body)


def _ask(url: str, timeout: float, api_key: str | None) -> tuple[list[str] | None, str]:
    """(served model ids, "") when ``url`` answers ``GET /models``; (None, why) when it does not."""
    try:
        status, body = _get(url.rstrip("/") + "/models", timeout, api_key)
    except httpx.HTTPError as e:
        return None, f"{type(e).__name__}: {e}"
    if status in (401, 403):
        raise JudgeConfigError(
            f"judge {url}: GET /models answered HTTP {status}: the judge server wants another API key than "
            f"{'the one given' if api_key else 'none'}; fix: give its key as the judge option api_key, or set "
            "PROM_REWARD_API_KEY (or OPENAI_API_KEY) to it",
            url=url,
            status=status,
        )
    if status == 404:
        logger.warning(
            "judge %s has no GET /models (not an OpenAI-compatible server?); the model name is not checked", url
        )
        return [], ""
    if status != 200:
        return None, f"HTTP {status} on GET /models"
    try:
        return [str(m["id"]) for m in json.loads(body)["data"]], ""
    except (ValueError, KeyError, TypeError) as e:
        return None, f"malformed GET /models reply ({e})"


def _check_model(url: str, served: list[str], model: str | None) -> None:
    if model and served and model not in served:
        raise JudgeConfigError(
            f"judge {url} does not serve the model {model!r} (it serves {', '.join(served)}); fix: set "
            "model (--model / PROM_REWARD_MODEL) to one of those, or leave it unset to use the first",
            url=url,
        )


def check_judge(
    server: JudgeServer | None,
    *,
    outage: OutagePolicy | None = None,
    timeout: float = 5.0,
    health: JudgeHealth | None = None,
    probe_every: float = 10.0,
    reward: Any = None,
    canary_timeout: float = 120.0,
    on_misconfigured: Callable[[str], None] | None = None,
) -> JudgeCheck:
    """Probe every URL of ``server`` (the judge's, as its requests ask it: ``JudgeHolder.judge_server``; None: an
    in-process judge, nothing to probe) with its key and run ``reward``'s canary (see the module docstring); raises
    ``ConfigError`` (``JudgeConfigError`` from the canary) for a judge that answers wrongly. ``outage``: what
    the samples meet while a URL is down (the reward's policy, by default), said in the warning."""
    check = JudgeCheck()
    urls, model, api_key = (server.urls, server.model, server.api_key) if server is not None else ((), None, None)
    policy = outage if outage is not None else reward.config.outage if reward is not None else None
    down = dict.fromkeys(urls, "")

    def ask(late: bool) -> None:
        """Ask each URL still down; a wrong answer raises ``ConfigError``; once every URL answered, the canary."""
        for url in list(down):
            del down[url]
            served, why = _ask(url, timeout, api_key)  # a refused key raises here
            check.reachable[url] = served is not None
            if served is None:
                down[url] = why
                continue
            check.models[url] = served
            _check_model(url, served, model)
            if late:
                logger.warning("judge %s is answering now (serves %s)", url, ", ".join(served) or "?")
        if not down and urls:
            _canary(reward, canary_timeout, health)

    def probe_until_up() -> None:
        stop, wrong = threading.Event(), False
        while down and not stop.wait(probe_every):
            try:
                ask(late=True)
            except ConfigError as e:
                logger.error("%s", e)
                wrong = True
                if health is not None:
                    health.failed(str(e))
                if on_misconfigured is not None:
                    on_misconfigured(str(e))
        if not wrong and health is not None:
            health.succeeded()

    ask(late=False)
    for url, why in down.items():
        logger.warning(
            "judge %s is not answering (%s); starting anyway and probing it every %.0f s; until it answers, %s",
            url,
            why,
            probe_every,
            _meanwhile(policy),
        )
        if health is not None:
            health.failed(f"judge {url} not answering at start: {why}")
    if down:
        check.probing = threading.Thread(target=probe_until_up, name="prom-reward-judge-probe", daemon=True)
        check.probing.start()
    return check


def _meanwhile(policy: OutagePolicy | None) -> str:
    """What the samples meet while the judge is down, as ``policy`` (the reward's outage policy) says.

    >>> _meanwhile(OutagePolicy(budget_s=30, on_exhausted="fail"))
    'samples wait within the outage budget (30 s), then get the failure reward'
    """
    if policy is None:
        return "samples wait within the outage budget, then meet its on_exhausted"
    waited = f"samples wait within the outage budget ({policy.budget_s:g} s), then "
    if policy.on_exhausted == "fail":
        return waited + "get the failure reward"
    return waited + (
        "their request fails with JudgeUnavailableError naming the cause (outage on_exhausted raise: reward-server "
        "answers it 503); on_exhausted fail would give them the failure reward instead"
    )


def _canary(reward: Any, seconds: float, health: JudgeHealth | None) -> None:
    """``reward``'s configuration canary (None: none); a judge that does not answer it only warns."""
    if reward is None:
        return
    try:
        why = reward.check_configuration(deadline=time.monotonic() + seconds)
    except ConfigError:
        raise
    except (BackendError, JudgeUnavailableError) as e:  # not up (on_exhausted="raise"), not misconfigured
        why = str(e)
    if why is not None:
        logger.warning("judge did not answer the canary judgment (%s); starting anyway", why)
        if health is not None:
            health.failed(f"canary judgment not answered at start: {why}")
