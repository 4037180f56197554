"""``ServerHealth``: the reward server's ``GET /health``, the worst signal winning: ``failing`` (a misconfigured
judge), ``degraded`` (the judge failing now, or too many recent samples failed), ``ok``."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from prom_reward.rewards.outage import JudgeHealth

FAILURE_WINDOW = 100
"""The recent samples the failure share is taken over."""
MIN_SAMPLES = 10
"""Samples needed before the failure share can turn ``/health`` degraded."""


class ServerHealth:
    """The judge's ``JudgeHealth``, a configuration failure, and the recent failure share."""

    def __init__(self, judge: JudgeHealth, degraded_failure_share: float) -> None:
        self.judge = judge
        self.threshold = degraded_failure_share
        self.config_error: str | None = None
        self._recent: deque[bool] = deque(maxlen=FAILURE_WINDOW)
        self._lock = threading.Lock()

    def record(self, failed: Iterable[bool]) -> None:
        """Record answered samples (True: it failed)."""
        with self._lock:
            self._recent.extend(bool(f) for f in failed)

    def misconfigured(self, cause: str) -> None:
        """``/health`` says failing with ``cause`` from now on."""
        self.config_error = cause

    def status(self) -> dict[str, Any]:
        """``JudgeHealth.status()`` plus ``recent_failure_share``; status ``failing``, ``degraded`` or ``ok``."""
        out = self.judge.status()
        with self._lock:
            n = len(self._recent)
            share = sum(self._recent) / n if n >= MIN_SAMPLES else None
        out["recent_failure_share"] = None if share is None else round(share, 3)
        if self.config_error is not None:
            out.update(status="failing", cause=self.config_error)
        elif out["status"] == "ok" and share is not None and share > self.threshold:
            out.update(
                status="degraded",
                cause=f"{share:.0%} of the last {len(self._recent)} samples failed (over degraded_failure_share "
                f"{self.threshold:g}): see failure_reasons in the replies and the server log",
            )
        return out


__all__ = ["FAILURE_WINDOW", "MIN_SAMPLES", "ServerHealth"]
