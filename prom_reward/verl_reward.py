"""Backward-compatible name of ``prom_reward.integrations.verl`` (the verl custom reward function).

Everything lives in ``prom_reward.integrations.verl``; this module re-exports it, so even a
copy of this file loaded by path shares the real module's state and its functions pickle by
reference. Point verl 0.9 at ``pkg://prom_reward.integrations.verl`` (see docs/verl.md).

Example:
    >>> from prom_reward import verl_reward
    >>> verl_reward.compute_score.__module__
    'prom_reward.integrations.verl'
"""

from __future__ import annotations

from typing import Any, Sequence

from prom_reward.errors import InputError
from prom_reward.integrations import verl as _verl
from prom_reward.integrations.verl import (SETTINGS, compute_score, compute_score_sync, configure,  # noqa: F401
                                           reset, reward_from_settings, settings, stats)


def reward_from_env(env: "dict[str, str] | None" = None) -> Any:
    """The ``PrometheusReward`` the ``PROM_REWARD_*`` variables describe (an explicit judge URL)."""
    return reward_from_settings(settings(env=env))


def compute_score_batch(data_sources: Sequence[Any] | None = None, solution_strs: Sequence[str] = (),
                        ground_truths: Sequence[Any] | None = None, extra_infos: Sequence[Any] | None = None,
                        **kwargs: Any) -> list[float]:
    """The old batched form: one float per solution (for Python callers; verl 0.9 has no batch manager)."""
    n = len(solution_strs)
    truths = list(ground_truths) if ground_truths is not None else [None] * n
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if len(truths) != n or len(infos) != n:
        raise InputError(f"got {n} solutions, {len(truths)} ground truths and {len(infos)} extra_infos; "
                         "expected one of each per solution")
    if n == 0:
        return []
    jobs = [_verl._job(s, t, i) for s, t, i in zip(solution_strs, truths, infos)]
    st = _verl._state(kwargs.pop("reward_router_address", None), kwargs)
    return [_verl._fields(st, r)["score"] for r in st.batched.score(jobs, timeout=st.timeout)]
