"""``BatchedReward``: one ``PrometheusReward`` shared by concurrent single-sample callers (OpenRLHF, verl,
verifiers), their samples judged in batches; each gets a ``SampleOutcome`` with the same log keys."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prom_reward.backends.bridge import sync_method
from prom_reward.backends.factory import backend_class
from prom_reward.checklist.judging import CHECKLIST_KEYS
from prom_reward.errors import ConfigError
from prom_reward.integrations.batching import MicroBatcher
from prom_reward.rewards.config import failure_value
from prom_reward.rewards.diagnostics import diagnostic_keys
from prom_reward.rewards.samples import RewardSample

# Batch metrics each mode always reports (a per-sample log key needs a number for every sample: no NaN-able ones).
_MODE_KEYS = {
    "absolute": ("parse_failure_rate", "abstain_rate", "forced_rate"),
    "pairwise_reference": ("parse_failure_rate", "abstain_rate", "tie_rate", "win_rate"),
    "pairwise_group": ("parse_failure_rate", "abstain_rate", "tie_rate", "judged_pairs", "degenerate_groups"),
}
_CALL_KEYS = (
    "judge_seconds",
    "judge_completion_tokens",
    "judge_prompt_tokens",
    "truncated_responses",
    "failed_samples",
    "outage_failures",
)


@dataclass
class SampleOutcome:
    """The judge's answer for one ``RewardSample``: its reward (or its failure and why) and its batch."""

    reward: float | None
    """None where the judge failed, ``reason`` saying why."""
    failed: bool
    reason: str | None
    feedback: str | None
    batch_size: int
    """Samples in the judge call this one was part of."""
    queue_seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    """The batch's metrics under the fixed keys of ``BatchedReward.extra_log_keys`` (minus the per-sample ones)."""

    def extra_logs(self) -> dict[str, float]:
        """Per-sample log values, always the same keys: ``judge_failed``, ``judge_batch_size``, the batch metrics."""
        per_sample = {"judge_failed": float(self.failed), "judge_batch_size": float(self.batch_size)}
        return {**per_sample, "judge_queue_seconds": self.queue_seconds, **self.metrics}


class FailurePolicy:
    """What number a failed judgment becomes where a framework cannot take ``None``: ``value`` is a number or
    ``"min"`` (the lowest reward of the configured scale); no default, the caller must choose."""

    def __init__(self, value: Any) -> None:
        if value is None or value == "":
            raise ConfigError(
                "not set: when the judge gives no verdict for a sample, the trainer still needs a number, and "
                "prom-reward will not pick one silently (the sample is flagged judge_failed=1 and counted either "
                "way); fix: choose a number (e.g. 0.0) or 'min' (the lowest reward of the configured scale)",
                "failure_reward",
            )
        is_min = isinstance(value, str) and value.strip().lower() == "min"
        self.value: float | str = "min" if is_min else failure_value(value, None)

    def value_for(self, config: Any) -> float:
        """The number for a failed sample under ``config`` (a ``RewardConfig``; off its scale: ``ConfigError``)."""
        return failure_value(self.value, config)

    def __repr__(self) -> str:
        return f"FailurePolicy({self.value!r})"


class BatchedReward:
    """Micro-batch concurrent reward requests into calls of ``reward.ajudge_batch`` (a ``PrometheusReward``),
    ``max_concurrent`` at once where the judge takes concurrent calls; ``pairwise_group``: a batch waits for
    ``group_size`` samples of a prompt, at most ``group_wait_s`` (a sample left alone fails). ``batching``: the
    ``MicroBatcher``'s ``max_wait_s``, ``max_batch_size`` and ``group_wait_s``."""

    def __init__(self, reward: Any, *, max_concurrent: int = 4, group_size: int | None = None, **batching: Any) -> None:
        self.reward = reward
        mode = reward.config.mode
        self.group_size = group_size if mode == "pairwise_group" else None
        self.extra_log_keys: tuple[str, ...] = (
            ("judge_failed", "judge_batch_size", "judge_queue_seconds")
            + _MODE_KEYS[mode]
            + (CHECKLIST_KEYS if mode == "absolute" else ())  # checklists are judged in absolute mode only
            + _CALL_KEYS
            + (() if reward._judge is None else tuple(reward._judge.stats.counters))  # a cascade's routing
            + diagnostic_keys(reward.config)
        )
        """The per-sample log keys every result carries, in order."""
        if reward._judge is None:  # not built yet: whether its backend takes concurrent calls
            backend = reward._judge_spec.kwargs()["backend"] if reward._judge_spec is not None else "vllm"
            caps = (backend_class(backend) if isinstance(backend, str) else backend).capabilities
        else:
            caps = reward._judge.capabilities
        concurrent = max_concurrent if caps.thread_safe else 1
        self._batcher: MicroBatcher = MicroBatcher(
            self._judge, group_size=self.group_size, max_concurrent=concurrent, **batching
        )

    @property
    def stats(self) -> Any:
        return self._batcher.stats

    async def ascore(self, samples: Sequence[RewardSample], *, timeout: float | None = None) -> list[SampleOutcome]:
        """Judge ``samples``, batched with the concurrent callers of the same loop (``score``: the sync form); not
        started within ``timeout`` s: ``DeadlineExceeded``."""
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        queued = [(s, now, deadline) for s in samples]
        groups = {s.group for s in samples} if self.group_size is not None else set()
        group = groups.pop() if len(groups) == 1 else None  # a request with several prompts goes as it is
        return await self._batcher.arun(queued, timeout=timeout, group=group)

    score = sync_method(ascore)

    def close(self) -> None:
        """Refuse new samples (queued ones are still judged)."""
        self._batcher.close()

    def unjudged(self, reason: str) -> SampleOutcome:
        """A failed ``SampleOutcome`` for a sample that never reached the judge (the batch metrics read 0)."""
        return SampleOutcome(None, True, reason, None, 0, 0.0, {k: 0.0 for k in self.extra_log_keys[3:]})

    async def _judge(self, queued: list[tuple[RewardSample, float, float | None]]) -> list[SampleOutcome]:
        start = time.monotonic()
        samples = [s for s, _, _ in queued]
        queue = [max(start - t, 0.0) for _, t, _ in queued]
        deadlines = [d for _, _, d in queued]
        deadline = None if any(d is None for d in deadlines) else max(deadlines)  # type: ignore[type-var]
        n = len(samples)
        members = Counter(s.group for s in samples) if self.group_size is not None else Counter()
        alone = {i for i, s in enumerate(samples) if members[s.group] == 1}
        todo = [i for i in range(n) if i not in alone]
        out = await self.reward.ajudge_batch([samples[i] for i in todo], deadline=deadline) if todo else None
        failed = len(alone) + (sum(r is None for r in out.rewards) if out is not None else 0)
        got = out.metrics if out is not None else {}  # no judge call (every sample alone in its group): 0s
        metrics = {k: float(got.get(k, 0.0)) for k in self.extra_log_keys[3:]}
        metrics["abstain_rate"] = failed / n
        results: list[SampleOutcome | None] = [None] * n
        lone = (
            f"pairwise_group: only 1 of the {self.group_size} samples of this prompt arrived within group_wait_s, "
            "so there was nothing to compare it with"
        )
        for i in alone:
            results[i] = SampleOutcome(None, True, lone, None, n, queue[i], dict(metrics))
        if out is not None:
            for pos, i in enumerate(todo):
                r = out.rewards[pos]
                reason = (out.reasons[pos] if out.reasons else None) or "the judge gave no parseable verdict"
                results[i] = SampleOutcome(
                    r, r is None, None if r is not None else reason, out.feedback[pos], n, queue[i], dict(metrics)
                )
        return results  # type: ignore[return-value]


@dataclass
class SharedReward:
    """A process-wide ``BatchedReward`` and the ``RewardSettings`` around it (``owned``: its reward was built here)."""

    batched: BatchedReward
    settings: Any
    owned: bool
    pid: int = field(default_factory=os.getpid)

    def close(self) -> None:
        self.batched.close()
        if self.owned:
            self.batched.reward.close()


class SharedRewards:
    """This process's batched rewards by key, each built once on first use (again in a forked child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, SharedReward] = {}

    def get(self, key: Hashable, build: Callable[[], SharedReward]) -> SharedReward:
        with self._lock:
            held = self._held.get(key)
            if held is None or held.pid != os.getpid():
                held = self._held[key] = build()
            return held

    def values(self) -> list[SharedReward]:
        with self._lock:
            return list(self._held.values())

    def reset(self) -> None:
        """Close and forget them all."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for h in held:
            h.close()
