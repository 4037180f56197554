"""``PrometheusReward``: a judge as a reward function for TRL's online trainers.

Pass it in ``reward_funcs`` of ``GRPOTrainer`` or ``RLOOTrainer`` (TRL 1.16). TRL calls it
with ``prompts``, ``completions`` (strings, or message lists for conversational data),
the dataset's other columns, and ``log_metric`` / ``log_extra``. It returns one float
per completion, or ``None`` where the judge failed after its retries (TRL treats that
as "abstain"), never a made-up number. Per-row ``rubric``, ``reference_answer``,
``instruction`` and ``baseline`` columns are used when present (names configurable).

The judge is built lazily when given as a dict of ``PrometheusJudge`` options, and
such a reward pickles (each process builds its own judge: TRL's async GRPO runs
reward functions in a child process). ``AsyncPrometheusReward`` has an
``async def __call__`` that TRL awaits concurrently with other reward functions.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Exact. [RESULT] 5", "Vague. [RESULT] 2"])
    >>> reward = PrometheusReward(judge, rubric="helpfulness")
    >>> reward(prompts=["What is 2+2?", "What is 2+2?"], completions=["4", "a number"])
    [5.0, 2.0]
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from typing import Any, Callable, Sequence

from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.errors import ConfigError, InputError, PromRewardError
from prom_reward.rewards.holder import JudgeHolder
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.diagnostics import batch_diagnostics
from prom_reward.rewards.length import control_length
from prom_reward.rewards.modes import MODE_FUNCTIONS, ModeOutput, RewardItem
from prom_reward.format.rubrics import Rubric, get_rubric
from prom_reward.format.sanitize import neutralize

_TRL_KWARGS = ("trainer_state", "log_metric", "log_extra", "environments")


def _cascade_metrics(before: Any, after: Any) -> dict[str, float]:
    """This batch's routing and fallback cost from a ``CascadeJudge``'s counters."""
    items = after.items - before.items
    return {
        "cascade_routed_fraction": (after.routed - before.routed) / items if items else math.nan,
        "cascade_routed_failed": float(after.routed_failed - before.routed_failed),
        "cascade_fallback_calls": float(after.fallback_calls - before.fallback_calls),
        "cascade_fallback_failed": float(after.fallback_failed - before.fallback_failed),
        "cascade_fallback_prompt_tokens": float(after.fallback_prompt_tokens - before.fallback_prompt_tokens),
        "cascade_fallback_completion_tokens": float(after.fallback_completion_tokens
                                                    - before.fallback_completion_tokens),
    }


class PrometheusReward(JudgeHolder):
    """Judge-based reward for TRL (sync). Options are ``RewardConfig`` fields.

    Args:
        judge: a ``PrometheusJudge``, or a dict of its options (built lazily, picklable).
        config: a ``RewardConfig``; or pass its fields as keyword arguments.
    """

    def __init__(self, judge: Any, config: RewardConfig | None = None, **options: Any) -> None:
        if config is not None and options:
            raise ConfigError("pass either config=RewardConfig(...) or its fields as keywords, not both")
        self.config = config or RewardConfig(**options)
        super().__init__(judge)
        self.__name__ = self.config.name
        self.last_metrics: dict[str, float] = {}

    # -- the reward -------------------------------------------------------------------
    def _items(self, prompts: Sequence[Any], completions: Sequence[Any], columns: dict[str, Any]) -> list[RewardItem]:
        n = len(prompts)
        if len(completions) != n:
            raise InputError(f"got {len(prompts)} prompts but {len(completions)} completions; TRL passes one prompt "
                             "per completion", field="completions")
        cfg = self.config

        def column(name: str) -> list[Any] | None:
            values = columns.get(name)
            if values is None:
                return None
            if not isinstance(values, (list, tuple)) or len(values) != n:
                raise InputError(f"column {name!r}: expected one value per completion ({n}), got "
                                 f"{type(values).__name__} of length {len(values) if hasattr(values, '__len__') else '?'}",
                                 field=name)
            return list(values)

        rubrics = column(cfg.rubric_column) or [cfg.rubric] * n
        refs = column(cfg.reference_column) or [cfg.reference_answer] * n
        instructions = column(cfg.instruction_column)
        baselines = column(cfg.baseline_column) or [None] * n
        resolved: dict[str, Rubric] = {}
        items = []
        for i, (p, c) in enumerate(zip(prompts, completions)):
            r = rubrics[i] if rubrics[i] is not None else cfg.rubric
            key = r if isinstance(r, str) else json.dumps(r, sort_keys=True, default=str)
            if key not in resolved:
                try:
                    resolved[key] = get_rubric(r)
                except PromRewardError as e:
                    raise InputError(f"item {i}: rubric: {e}", index=i, field=cfg.rubric_column) from e
            instruction = instructions[i] if instructions and instructions[i] is not None else prompt_text(p, i)
            baseline = baselines[i]
            items.append(RewardItem(
                group=p if isinstance(p, str) else json.dumps(p, sort_keys=True, default=str),
                instruction=instruction, response=completion_text(c, i), rubric=resolved[key],
                reference_answer=refs[i] if refs[i] is not None else cfg.reference_answer,
                baseline=completion_text(baseline, i) if baseline is not None else None,
            ))
        return items

    def judge_batch(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> ModeOutput:
        """Rewards with their feedback and the batch's metrics (what integrations need per item).

        ``rewards[i]`` is None where the judge failed; ``metrics`` are this call's counters.

        >>> from prom_reward import PrometheusJudge
        >>> r = PrometheusReward(PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"]))
        >>> out = r.judge_batch(["Say hi."], ["hi"])
        >>> out.rewards, out.feedback, out.metrics["parse_failure_rate"]
        ([4.0], ['Fine.'], 0.0)
        """
        return self._run_mode(self._items(prompts, completions, columns)) if prompts else ModeOutput([], [])

    def _run_mode(self, items: list[RewardItem]) -> ModeOutput:
        judge = self.judge
        before = (judge.stats.completion_tokens, judge.stats.prompt_tokens, judge.stats.neutralized)
        cascade = getattr(judge, "cascade_stats", None)
        cascade_before = dataclasses.replace(cascade) if cascade is not None else None
        start = time.perf_counter()
        out = MODE_FUNCTIONS[self.config.mode](judge, items, self.config)
        out.rewards, length_metrics = control_length(out.rewards, [it.response for it in items],
                                                     [it.group for it in items], self.config)
        metrics = {**out.metrics, **length_metrics, **batch_diagnostics(items, out.rewards, out.feedback, self.config)}
        metrics["judge_seconds"] = time.perf_counter() - start
        metrics["judge_completion_tokens"] = float(judge.stats.completion_tokens - before[0])
        metrics["judge_prompt_tokens"] = float(judge.stats.prompt_tokens - before[1])
        metrics["markers_neutralized"] = float(judge.stats.neutralized - before[2])
        if cascade is not None and cascade_before is not None:
            metrics.update(_cascade_metrics(cascade_before, cascade))
        out.metrics = metrics
        self.last_metrics = metrics
        return out

    def compute(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None,
                **kwargs: Any) -> list[float | None]:
        """Rewards for a batch (what ``__call__`` does); logs through TRL's callbacks when given."""
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        log_extra: Callable[[str, list], None] | None = kwargs.get("log_extra")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        if not prompts:
            return []
        items = self._items(prompts, completions, columns)
        out = self._run_mode(items)
        metrics = out.metrics
        name = self.config.name
        if log_metric is not None:
            for key, value in metrics.items():
                if value == value:  # skip NaN (e.g. no swap agreement to report)
                    log_metric(f"{name}/{key}", float(value))
        if log_extra is not None and self.config.log_feedback:
            log_extra(f"{name}_feedback", [fb or "" for fb in out.feedback])
            if out.judges:
                log_extra(f"{name}_judge", [who or "" for who in out.judges])
            marks = [neutralize(it.response)[1] for it in items]
            if any(marks):
                log_extra(f"{name}_markers_neutralized", marks)
        return out.rewards

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None,
                 **kwargs: Any) -> list[float | None]:
        return self.compute(prompts, completions, completion_ids, **kwargs)

    async def acall(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None,
                    **kwargs: Any) -> list[float | None]:
        """Awaitable form: runs the judge in a worker thread, leaving the event loop free."""
        return await asyncio.to_thread(self.compute, prompts, completions, completion_ids, **kwargs)


class AsyncPrometheusReward(PrometheusReward):
    """The same reward with ``async def __call__``: TRL awaits it alongside other async rewards."""

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],  # type: ignore[override]
                       completion_ids: Any = None, **kwargs: Any) -> list[float | None]:
        return await self.acall(prompts, completions, completion_ids, **kwargs)
