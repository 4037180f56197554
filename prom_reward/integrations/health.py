"""``ServerHealth``: what the reward server's ``GET /health`` says, the worst signal winning: ``"failing"``
(503: a misconfigured judge), ``"degraded"`` (the judge failing now, or too many recent samples failed), ``"ok"``.

Example:
    >>> from prom_reward.rewards.outage import JudgeHealth
    >>> h = ServerHealth(JudgeHealth(), degraded_failure_share=0.5)
    >>> h.record([True] * 6 + [False] * 4); h.status()["status"], h.status()["recent_failure_share"]
    ('degraded', 0.6)
    >>> h.misconfigured("judge http://j:8000: HTTP 404"); h.status()["status"]
    'failing'
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from prom_reward.rewards.outage import JudgeHealth

FAILURE_WINDOW = 100
"""The recent samples the failure share is taken over (fewer at the start: at least ``MIN_SAMPLES``)."""
MIN_SAMPLES = 10
"""Samples needed before the failure share can turn ``/health`` degraded."""


class ServerHealth:
    """The reward server's health: the judge's ``JudgeHealth``, a configuration failure, the recent failure share."""

    def __init__(self, judge: JudgeHealth, degraded_failure_share: float) -> None:
        self.judge = judge
        self.threshold = degraded_failure_share
        self.config_error: str | None = None
        """The configuration failure met (None: none)."""
        self._recent: deque[bool] = deque(maxlen=FAILURE_WINDOW)
        self._lock = threading.Lock()

    def record(self, failed: Iterable[bool]) -> None:
        """Record answered samples (True: it failed)."""
        with self._lock:
            self._recent.extend(bool(f) for f in failed)

    def misconfigured(self, cause: str) -> None:
        """The judge is misconfigured: ``/health`` says failing with ``cause`` from now on."""
        self.config_error = cause

    def failure_share(self) -> float | None:
        """The share of the recent samples that failed (None before ``MIN_SAMPLES``)."""
        with self._lock:
            n = len(self._recent)
            return sum(self._recent) / n if n >= MIN_SAMPLES else None

    def status(self) -> dict[str, Any]:
        """``JudgeHealth.status()`` plus ``recent_failure_share``; status ``failing``, ``degraded`` or ``ok``."""
        out = self.judge.status()
        share = self.failure_share()
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
