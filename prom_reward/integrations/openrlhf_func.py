"""OpenRLHF's in-process ``reward_func`` (``--reward.remote_url /path/to/openrlhf_reward_func.py``): one
process-wide ``BatchedReward``, built on the first call from ``RewardSettings`` or installed by ``configure``."""

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
from prom_reward.rewards.startup import check_judge

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_state: _State | None = None


@dataclass
class _State:
    batched: BatchedReward
    settings: RewardSettings
    owned: bool = False
    """Built here from the settings (``close`` closes it), not given to ``configure``."""

    def close(self) -> None:
        self.batched.close()
        if self.owned:
            self.batched.reward.close()


def configure(reward: Any, **settings: Any) -> BatchedReward:
    """Install ``reward`` (a ``PrometheusReward``) as ``reward_func``'s judge, with ``RewardSettings`` fields
    ``settings`` (over the environment); returns its queue."""
    global _state
    new = _new_state(reward, RewardSettings.around(reward.config, settings))
    with _lock:
        old, _state = _state, new
    if old is not None:
        old.close()
    return new.batched


def _new_state(reward: Any, s: RewardSettings, *, owned: bool = False) -> _State:
    s.failure_reward.value_for(reward.config)  # on the reward's own scale (a configured reward has its own)
    return _State(s.batched(reward), s, owned)


def reset() -> None:
    """Drop the process-wide judge, closing a reward built from the settings."""
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
    """The file to give OpenRLHF as ``--reward.remote_url``."""
    return str(Path(__file__).with_name("openrlhf_reward_func.py"))
