"""Endpoint health for ``OpenAIServer``: which judge servers get traffic, across calls (``EndpointPool``); the
policy (least calls in flight, ejection after ``eject_after`` failures, health probes) is in docs/design-notes.md."""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class EndpointState:
    """What the pool knows of one base URL."""

    in_flight: int = 0
    strikes: int = 0
    """Consecutive failures (reset by any success)."""
    failed_at: float = -math.inf
    out_until: float | None = None
    """Monotonic time from which an out URL may be probed; None while up."""
    interval: float = 0.0
    """The current wait before the next probe (doubles after each failed probe)."""
    probing: bool = False
    requests: int = 0
    failures: int = 0
    ejections: int = 0


class EndpointPool:
    """Load balancing and ejection over several base URLs."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        eject_after: int = 3,
        probe_interval: float = 5.0,
        max_probe_interval: float = 60.0,
    ) -> None:
        self.urls = list(urls)
        self.eject_after, self.probe_interval = eject_after, float(probe_interval)
        self.max_probe_interval = max(float(max_probe_interval), self.probe_interval)
        self._lock = threading.Lock()
        self._state = {u: EndpointState() for u in self.urls}
        self._turn = 0
        self.out = 0
        """How many URLs are out (read without the lock: a call that misses a change probes at the next)."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and copied) as a fresh pool with the same options: health is per process."""
        options = {k: getattr(self, k) for k in ("eject_after", "probe_interval", "max_probe_interval")}
        return functools.partial(EndpointPool, self.urls, **options), ()

    def is_up(self, url: str) -> bool:
        return self._state[url].out_until is None

    def pick(self, *, now: float | None = None, sent: bool = False) -> str:
        """The URL for the next call: an up URL (not one that failed in the last ``probe_interval`` seconds
        when another is clean) with the fewest calls in flight, ties rotating; with none up, the out URL due
        soonest. ``sent``: the call is sent to it now (``sent``)."""
        with self._lock:
            url = self._pick(time.monotonic() if now is None else now)
            if sent:
                self._sent(url)
            return url

    def _pick(self, now: float) -> str:
        if len(self.urls) == 1:
            return self.urls[0]
        self._turn += 1
        up = [u for u in self.urls if self._state[u].out_until is None]
        recent = now - self.probe_interval
        pool = [u for u in up if not self._state[u].strikes or self._state[u].failed_at < recent] or up
        if pool:
            shift = self._turn % len(pool)
            return min(pool[shift:] + pool[:shift], key=lambda u: self._state[u].in_flight)
        return min(self.urls, key=lambda u: self._state[u].out_until or 0.0)

    def sent(self, url: str) -> None:
        with self._lock:
            self._sent(url)

    def _sent(self, url: str) -> None:
        s = self._state[url]
        s.in_flight += 1
        s.requests += 1

    def answered(self, url: str) -> None:
        with self._lock:
            self._state[url].in_flight -= 1

    def succeeded(self, url: str) -> None:
        """A good reply (or probe): the URL is up again with no strikes."""
        with self._lock:
            s = self._state[url]
            if s.out_until is not None:
                log.warning("judge endpoint %s is back in", url)
                self.out -= 1
            s.strikes, s.out_until, s.interval, s.probing = 0, None, 0.0, False

    def failed(self, url: str, *, now: float | None = None) -> None:
        """A failed call: one more strike; ``eject_after`` in a row take the URL out."""
        now = time.monotonic() if now is None else now
        with self._lock:
            s = self._state[url]
            s.strikes += 1
            s.failures += 1
            s.failed_at = now
            if s.out_until is None and s.strikes >= self.eject_after:
                s.interval = self.probe_interval
                s.out_until = now + s.interval
                s.ejections += 1
                self.out += 1
                log.warning(
                    "judge endpoint %s taken out after %d failures in a row; probing it again in %.1fs",
                    url,
                    s.strikes,
                    s.interval,
                )
            elif s.out_until is not None:  # used while out (every URL was out): wait longer
                s.out_until = now + s.interval

    def due_probes(self, *, now: float | None = None) -> list[str]:
        """Out URLs whose probe time has come (marked as being probed: call ``probe_done``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [
                u
                for u in self.urls
                if self._state[u].out_until is not None
                and not self._state[u].probing
                and self._state[u].out_until <= now  # type: ignore[operator]
            ]
            for u in due:
                self._state[u].probing = True
            return due

    def probe_done(self, url: str, ok: bool, *, now: float | None = None) -> None:
        """Record a probe's outcome: ok brings the URL back, else it stays out twice as long."""
        if ok:
            self.succeeded(url)
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            s = self._state[url]
            s.probing = False
            if s.out_until is not None:
                s.interval = min(max(s.interval, self.probe_interval) * 2, self.max_probe_interval)
                s.out_until = now + s.interval

    def probe_abandoned(self, url: str) -> None:
        """A probe cut short (its batch ended): probe again when next due."""
        with self._lock:
            self._state[url].probing = False

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per URL: ``up``, ``in_flight``, ``requests``, ``failures``, ``ejections``, ``strikes``."""
        counters = ("in_flight", "requests", "failures", "ejections", "strikes")
        with self._lock:
            return {
                u: {"up": s.out_until is None, **{k: getattr(s, k) for k in counters}} for u, s in self._state.items()
            }
