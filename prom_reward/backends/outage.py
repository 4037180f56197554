"""The outage policy of judge calls: how long a failing judge is retried, how long one call may take.

A reward path must not be the part that kills a days-long training run, and must not wait forever
either. ``OutagePolicy`` says, for every reward path alike (TRL, online DPO, the OpenRLHF server and
``reward_func``, verl):

- connection errors, 5xx, 429 and timeouts are retried with exponential back-off (``backoff_s``
  doubling up to ``max_backoff_s``) for up to ``budget_s`` seconds from the first failure, never past
  the caller's deadline (the reward server's ``request_timeout``, under OpenRLHF's 180 s);
- one judge HTTP call may take ``call_timeout_s`` (None: half the time left to the deadline, so a
  hung call is cut and retried once before the deadline; the backend's own ``timeout`` where there
  is no deadline);
- past the budget, ``on_exhausted`` decides: ``"raise"`` (a ``JudgeUnavailableError`` that says how
  long the judge has been failing and why: training stops) or ``"fail"`` (the samples get the
  failure reward with that reason, counted).

A reward call opens a ``CallScope`` (``with call_scope(policy, deadline=..., health=...)``); the
``openai`` backend reads it (``current_scope()``) in every HTTP call: a request that fails is
retried alone while the answers of the others are kept, and every answer is remembered in the
scope's memo so a batch re-run within the same reward call (after an outage, or to salvage the
answered samples when the budget ran out) does not ask the judge again. ``JudgeHealth`` records
failures and successes as they happen, for ``/health`` ("degraded" with the cause).

Example:
    >>> policy = OutagePolicy(budget_s=30, call_timeout_s=None)
    >>> policy.attempt_timeout(now=0.0, deadline=100.0, default=600.0)
    50.0
    >>> policy.retry_until(first_failure=10.0, deadline=25.0)
    25.0
    >>> [policy.delay(k) for k in range(1, 6)]
    [1.0, 2.0, 4.0, 8.0, 15.0]
    >>> health = JudgeHealth(); health.failed("HTTP 503", now=5.0); health.status(now=8.0)["status"]
    'degraded'
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prom_reward.errors import ConfigError

ON_EXHAUSTED = ("raise", "fail")


@dataclass(frozen=True)
class OutagePolicy:
    """How a reward call treats a judge that fails (unreachable, 5xx, hung): see the module docstring."""

    budget_s: float = 150.0
    """Seconds a failing judge is retried, from the first failure of the streak (capped by the caller's deadline)."""

    call_timeout_s: float | None = None
    """Seconds one judge HTTP call may take; None: half the time left to the deadline (the backend's
    own ``timeout`` where there is no deadline). Always cut at the deadline."""

    backoff_s: float = 1.0
    """First wait between retries of a failed call (doubles each retry)."""

    max_backoff_s: float = 15.0
    """Longest wait between retries."""

    on_exhausted: str = "raise"
    """Past the budget: ``"raise"`` (``JudgeUnavailableError``: training stops with the cause) or
    ``"fail"`` (the unanswered samples get the failure reward with the cause, counted)."""

    def __post_init__(self) -> None:
        for name, low in (("budget_s", 0.0), ("backoff_s", 0.0), ("max_backoff_s", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise ConfigError(f"{name}: expected seconds >= {low:g}, got {value!r}")
        t = self.call_timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise ConfigError(f"call_timeout_s: expected None (derived from the deadline) or seconds > 0, got {t!r}")
        if self.on_exhausted not in ON_EXHAUSTED:
            raise ConfigError(f"on_exhausted: expected one of {', '.join(ON_EXHAUSTED)}, got {self.on_exhausted!r}")

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1, 2, ...)."""
        return float(min(self.backoff_s * 2 ** max(attempt - 1, 0), self.max_backoff_s))

    def retry_until(self, first_failure: float, deadline: float | None) -> float:
        """The monotonic time after which a call that first failed at ``first_failure`` is not retried."""
        stop = first_failure + self.budget_s
        return stop if deadline is None else min(stop, deadline)

    def attempt_timeout(self, now: float, deadline: float | None, default: float) -> float:
        """Seconds the next HTTP attempt may take (at most the time left to ``deadline``)."""
        if deadline is None:
            return float(self.call_timeout_s or default)
        left = max(deadline - now, 0.0)
        return float(min(self.call_timeout_s if self.call_timeout_s is not None else left / 2, left))


class JudgeHealth:
    """Whether the judge is answering, from what every call saw (thread-safe).

    ``failed(cause)`` starts (or continues) a failure streak, ``succeeded()`` ends it; ``status()``
    is ``{"status": "ok" | "degraded", ...}`` with the cause and how long the judge has been failing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failing_since: float | None = None
        """Monotonic time of the first failure of the current streak (None: the judge is answering)."""
        self.last_error: str | None = None
        """The latest failure's description."""
        self.failures = 0
        """Failed judge calls (attempts) so far."""
        self.exhausted = 0
        """Reward calls whose outage budget ran out."""
        self.recent: deque[str] = deque(maxlen=5)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def failed(self, cause: str, *, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            if self.failing_since is None:
                self.failing_since = now
            self.last_error = cause
            self.failures += 1
            self.recent.append(cause)

    def succeeded(self) -> None:
        with self._lock:
            self.failing_since = None

    def gave_up(self) -> None:
        with self._lock:
            self.exhausted += 1

    def failing_for(self, *, now: float | None = None) -> float:
        """Seconds the current failure streak has lasted (0 while the judge answers)."""
        since = self.failing_since
        return 0.0 if since is None else max((time.monotonic() if now is None else now) - since, 0.0)

    def status(self, *, now: float | None = None) -> dict[str, Any]:
        """``{"status", "cause", "failing_s", "failures", "exhausted"}``."""
        with self._lock:
            degraded = self.failing_since is not None
            return {
                "status": "degraded" if degraded else "ok",
                "cause": self.last_error if degraded else None,
                "failing_s": round(self.failing_for(now=now), 1),
                "failures": self.failures,
                "exhausted": self.exhausted,
            }


@dataclass
class CallScope:
    """The outage policy, deadline and health of one reward call, seen by the backend's HTTP calls."""

    policy: OutagePolicy
    deadline: float | None = None
    """Monotonic time after which no judge call is started (None: none)."""
    health: JudgeHealth = field(default_factory=JudgeHealth)
    offline: bool = False
    """Answer only from ``memo`` (no network): set when the budget ran out, to salvage answered samples."""
    memo: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    """Answers received during this reward call, by request, with the pass that received them: a later
    pass (a re-run of the batch) takes them instead of asking again."""
    passes: int = 0
    """Judge calls (passes over a batch or part of it) begun in this scope."""
    _cursor: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @staticmethod
    def key(method: str, path: str, payload: Any) -> str:
        return json.dumps([method, path, payload], sort_keys=True, default=str)

    def begin_pass(self) -> None:
        """A new judge call starts: it may replay the answers of the earlier ones, each at most once."""
        with self._lock:
            self.passes += 1
            self._cursor = {}

    def remember(self, key: str, value: Any) -> None:
        with self._lock:
            self.memo.setdefault(key, []).append((self.passes, value))

    def recall(self, key: str, *, consume: bool) -> tuple[bool, Any]:
        """``(found, value)`` from an earlier pass: ``consume`` takes the next answer not replayed yet in this
        pass (identical generation requests get one answer each, re-samples ask the judge anew), else the
        latest is read (tokenize, model list)."""
        with self._lock:
            earlier = [v for p, v in self.memo.get(key, ()) if p < self.passes]
            if not earlier:
                return False, None
            if not consume:
                return True, earlier[-1]
            i = self._cursor.get(key, 0)
            if i >= len(earlier):
                return False, None
            self._cursor[key] = i + 1
            return True, earlier[i]


_SCOPE: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("prom_reward_call_scope", default=None)


def current_scope() -> CallScope | None:
    """The ``CallScope`` of the reward call running in this context, if any."""
    return _SCOPE.get()


@contextlib.contextmanager
def call_scope(scope: CallScope) -> Iterator[CallScope]:
    """Make ``scope`` the current one for the calls made inside the block (threads started with
    ``contextvars.copy_context`` and asyncio tasks inherit it)."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


__all__ = ["CallScope", "JudgeHealth", "OutagePolicy", "call_scope", "current_scope"]
