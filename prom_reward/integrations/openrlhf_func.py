"""OpenRLHF's in-process ``reward_func`` (``--reward.remote_url /path/to/openrlhf_reward_func.py``): one
process-wide ``BatchedReward``, built on the first call from ``RewardSettings`` or installed by ``configure``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prom_reward.errors import PromRewardError
from prom_reward.integrations.batched_reward import BatchedReward, SharedReward, SharedRewards
from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.integrations.openrlhf_inputs import make_samples, reward_dict
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.startup import check_judge

logger = logging.getLogger(__name__)
_shared = SharedRewards()


def configure(reward: Any, **settings: Any) -> BatchedReward:
    """Install ``reward`` (a ``PrometheusReward``) as ``reward_func``'s judge, with ``RewardSettings`` fields
    ``settings`` (over the environment); returns its queue."""
    s = RewardSettings.around(reward.config, settings)
    _shared.reset()
    return _shared.get(None, lambda: SharedReward(s.batched(reward), s, owned=False)).batched


def reset() -> None:
    """Drop the process-wide judge, closing a reward built from the settings."""
    _shared.reset()


def batched_reward() -> BatchedReward:
    """The process-wide ``BatchedReward`` (built from the environment on first use)."""
    return _shared.get(None, _from_settings).batched


def _from_settings() -> SharedReward:
    try:
        settings = RewardSettings.load()
        reward = settings.build_reward()
        check_judge(reward.judge_server(), reward=reward, canary=False)
    except PromRewardError as e:  # OpenRLHF logs reward_func errors at INFO only: say it loudly
        logger.error("prom-reward reward_func is not configured: %s", e)
        raise
    logger.info(
        "prom-reward reward_func ready (mode %s, failure reward %s)",
        settings.reward.mode,
        settings.failure_reward.value,
    )
    return SharedReward(settings.batched(reward), settings, owned=True)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """OpenRLHF's ``reward_func``: ``{"rewards", "scores", "extra_logs", "judge_failures", "failure_reasons"}``."""
    state = _shared.get(None, _from_settings)
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
