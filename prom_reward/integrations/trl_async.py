"""TRL 1.16's ``AsyncGRPOTrainer``: ``use_judged_loop(trainer)`` makes its rollout worker pass rewards
``log_metric``/``log_extra``, so their metrics and failure reasons reach the trainer's logs (docs/rewards.md)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from accelerate.logging import get_logger
from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, RolloutGroup, RolloutSample
from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop as TRLRolloutLoop

from prom_reward.core.sampler import check_counts
from prom_reward.errors import ConfigError

logger = get_logger(__name__)

_REASON_SUFFIX = "_failure_reason"


@dataclasses.dataclass
class GroupLog:
    """What the rewards logged while one group was scored: metrics (last value per key) and failure reasons."""

    metrics: dict[str, float | tuple[float, float]] = dataclasses.field(default_factory=dict)
    """TRL's metric shape: a gauge, or a rate's (numerator, denominator)."""
    reasons: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)

    def log_metric(self, key: str, value: float) -> None:
        """TRL's ``log_metric(name, value)``."""
        self.metrics[key] = float(value)

    def log_extra(self, column: str, values: list[Any]) -> None:
        """TRL's ``log_extra(column, values)``: a ``<reward>_failure_reason`` column's non-empty entries are kept."""
        if column.endswith(_REASON_SUFFIX):
            name = column[: -len(_REASON_SUFFIX)]
            self.reasons.extend((name, i, str(r)) for i, r in enumerate(values) if r)


class JudgedRolloutLoop(TRLRolloutLoop):
    """TRL's rollout loop whose ``_score_group`` gives rewards ``log_metric`` / ``log_extra``, scoring up to
    ``score_groups_in_flight`` waiting groups at once (``loop_kwargs``: TRL's ``_AsyncRolloutLoop`` arguments)."""

    def __init__(self, *, score_groups_in_flight: int = 1, **loop_kwargs: Any) -> None:
        check_counts(score_groups_in_flight=(score_groups_in_flight, 1))
        super().__init__(**loop_kwargs)
        self.score_groups_in_flight = score_groups_in_flight

    async def _score_group(self, group: RolloutGroup) -> list[RolloutSample]:
        groups = [group]
        while len(groups) < self.score_groups_in_flight and not self._groups_to_score.empty():
            waiting = self._groups_to_score.get_nowait()
            if waiting is None:  # the generate loop's end: left for the score loop to read next
                self._groups_to_score.put_nowait(None)
                break
            groups.append(waiting)
        parts = await asyncio.gather(*(self._score_one(g) for g in groups))
        return [sample for part in parts for sample in part]

    async def _score_one(self, group: RolloutGroup) -> list[RolloutSample]:
        """TRL's ``_score_group`` for one group, with the rewards' logging callbacks."""
        log = GroupLog()
        kwargs: dict[str, Any] = {**group.reward_kwargs, "log_metric": log.log_metric, "log_extra": log.log_extra}
        samples: list[RolloutSample] = await super()._score_group(dataclasses.replace(group, reward_kwargs=kwargs))
        for name, i, reason in log.reasons:
            logger.warning(f"[score] group {group.group_id}: {name} has no reward for completion {i}: {reason}")
        if log.metrics:
            self._push_metrics(log.metrics)
        return samples


def use_judged_loop(trainer: Any, score_groups_in_flight: int = 1) -> None:
    """Make ``trainer``'s ``AsyncRolloutWorker`` run ``JudgedRolloutLoop`` (call before ``train()``)."""
    check_counts(score_groups_in_flight=(score_groups_in_flight, 1))  # on the main process (the loop: in the child)
    worker = trainer.rollout_worker
    if not isinstance(worker, AsyncRolloutWorker):
        raise ConfigError(
            f"use_judged_loop: expected an AsyncGRPOTrainer whose rollout_worker is TRL's AsyncRolloutWorker "
            f"(on the main process), got {type(worker).__name__}; fix: call it on the main process's trainer "
            "before train(), or give your own worker JudgedRolloutLoop as its _loop_cls"
        )
    worker._loop_cls = JudgedRolloutLoop
    worker._loop_kwargs["score_groups_in_flight"] = score_groups_in_flight
