"""``reward_func`` for OpenRLHF's in-process reward (``--reward.remote_url /path/to/file.py``).

OpenRLHF 0.11 loads that file by path in every rollout actor (``spec_from_file_location``,
a fresh module each time) and calls ``reward_func([query], [prompt], [label])`` from worker
threads (OpenRLHF's thread pool), one sample per call. Point it at the shipped
``openrlhf_reward_func.py`` (``prom-reward openrlhf-func-path`` prints its path): that file only
imports ``reward_func`` from here, so the judge and its queue exist once per process however
often the file is loaded. The first call builds one process-wide ``BatchedReward``; concurrent
calls from OpenRLHF's threads wait ``batch_window_ms`` for each other and are judged as one batch.

Settings: ``RewardSettings`` (``prom_reward.integrations.settings``), read once on the first call
from the ``PROM_REWARD_*`` environment variables, then the YAML file of ``PROM_REWARD_CONFIG``
(docs/openrlhf.md has the table). The first call also checks the judge (``startup.check_judge``:
a wrong model name raises; a judge that is down only warns).

A sample that cannot be judged fails alone with its reason; a judge outage is retried within the
outage budget and the request timeout, then (``outage_on_exhausted=raise``, the default) the error
is logged at ERROR level and raised: OpenRLHF only logs it, keeps the sample without a reward and
stops in ``make_experience_batch``, so the run stops rather than train on failure rewards. With
``outage_on_exhausted=fail`` the unanswered samples get the failure reward with the cause.
``configure(reward, **settings)`` installs a ready ``PrometheusReward`` instead (tests, custom
judges; its ``RewardConfig`` is the reward settings, the others come from ``settings``);
``reset()`` drops the process-wide state.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.rewards.reward import PrometheusReward
    >>> _ = configure(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"])),
    ...               failure_reward="min")
    >>> out = reward_func(["Q: hi? A: hello"], ["Q: hi? A:"], [None])
    >>> out["rewards"], out["extra_logs"]["judge_failed"]
    ([4.0], [0.0])
    >>> reset()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.errors import PromRewardError
from prom_reward.integrations.batched_reward import BatchedReward
from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.integrations.openrlhf_inputs import make_samples, reward_dict
from prom_reward.integrations.settings import RewardSettings
from prom_reward.integrations.startup import check_judge

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_state: _State | None = None


@dataclass
class _State:
    batched: BatchedReward
    settings: RewardSettings
    owned: bool = False
    """The reward was built here from the settings (``close`` closes it), not given to ``configure``."""

    def close(self) -> None:
        self.batched.close()
        if self.owned:
            self.batched.reward.close()


def configure(reward: Any, **settings: Any) -> BatchedReward:
    """Install ``reward`` (a ``PrometheusReward``) as the process-wide judge of ``reward_func``; ``settings`` are
    ``RewardSettings`` fields (explicit, over the environment); returns its queue."""
    global _state
    new = _new_state(reward, RewardSettings.around(reward.config, settings))
    with _lock:
        old, _state = _state, new
    if old is not None:
        old.close()
    return new.batched


def _new_state(reward: Any, s: RewardSettings, *, owned: bool = False) -> _State:
    """The process-wide state for ``reward``: its batched queue and the settings ``reward_func`` reads."""
    s.failure_reward.value_for(reward.config)  # on the reward's own scale (a configured reward has its own)
    return _State(s.batched(reward), s, owned)


def reset() -> None:
    """Drop the process-wide judge, closing the reward built from the settings (the next call configures a new
    one)."""
    global _state
    with _lock:
        old, _state = _state, None
    if old is not None:
        old.close()


def batched_reward() -> BatchedReward:
    """The process-wide ``BatchedReward`` (built from the environment on first use)."""
    return _get().batched


def _get() -> _State:
    global _state
    with _lock:
        if _state is None:
            try:
                settings = RewardSettings.load()
                reward = settings.build_reward()
                check_judge(reward.judge_server(), outage=reward.config.outage, health=reward.health)
                _state = _new_state(reward, settings, owned=True)
            except PromRewardError as e:  # OpenRLHF logs reward_func errors at INFO only: say it loudly
                logger.error("prom-reward reward_func is not configured: %s", e)
                raise
            logger.info(
                "prom-reward reward_func ready (mode %s, failure reward %s)",
                settings.reward.mode,
                settings.failure_reward.value,
            )
        return _state


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """OpenRLHF's ``reward_func``: ``{"rewards", "scores", "extra_logs", "judge_failures", "failure_reasons"}``."""
    state = _get()
    s = state.settings
    try:
        samples, reasons, _ = make_samples(queries, prompts, labels, s.strip, s.reward)
    except PromRewardError as e:  # not lists, or lengths that differ: the caller's bug (OpenRLHF logs it at INFO)
        logger.error("prom-reward reward_func got unusable arguments: %s", e)
        raise
    live = [x for x in samples if x is not None]
    try:
        judged = state.batched.score(live, timeout=s.request_timeout) if live else []
    except DeadlineExceeded as e:
        logger.warning("%d sample(s) failed on the deadline: %s", len(live), e)
        judged = [state.batched.unjudged(str(e)) for _ in live]
    except PromRewardError as e:  # outage_on_exhausted=raise (or a configuration error): OpenRLHF logs it at INFO only
        logger.error("prom-reward reward_func stops the run: %s", e)
        raise
    return reward_dict(samples, reasons, judged, state.batched, s.failure_reward)


def reward_func_path() -> str:
    """The file to give OpenRLHF as ``--reward.remote_url`` (it only imports ``reward_func`` from here).

    >>> reward_func_path().endswith("openrlhf_reward_func.py")
    True
    """
    return str(Path(__file__).with_name("openrlhf_reward_func.py"))
