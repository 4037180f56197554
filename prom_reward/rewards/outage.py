"""The outage policy of judge calls: the one place a judge's transport failures are retried, with back-off,
within a budget and the caller's deadline, then raised or failed (``on_exhausted``); ``JudgeHealth`` records
failures for ``/health``. The rules are in docs/design-notes.md."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from prom_reward.core.protocol import CallOptions
from prom_reward.core.results import JudgeFailure, Judgment
from prom_reward.declared import check, setting
from prom_reward.errors import BackendError, JudgeUnavailableError

T = TypeVar("T")
J = TypeVar("J", bound=Judgment)
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutagePolicy:
    """How a judge call treats a judge that fails (unreachable, 5xx, hung).

    >>> policy = OutagePolicy(budget_s=30, call_timeout_s=None)
    >>> policy.attempt_timeout(now=0.0, deadline=100.0, default=600.0), policy.retry_until(10.0, deadline=25.0)
    (50.0, 25.0)
    >>> [policy.delay(k) for k in range(1, 6)]
    [1.0, 2.0, 4.0, 8.0, 15.0]
    """

    budget_s: float = setting(
        150.0,
        help="Seconds a failing judge is retried, from the first failure of the streak (capped by the caller's "
        "deadline).",
        ge=0,
        unit="seconds",
    )
    call_timeout_s: float | None = setting(
        None,
        help="""Seconds one judge HTTP call may take; None: half the time left to the deadline (the backend's
        own ``timeout`` where there is no deadline). Always cut at the deadline.""",
        gt=0,
        unit="seconds",
        note="{None}: derived from the deadline",
    )
    backoff_s: float = setting(
        1.0, help="First wait between retries of a failed call (doubles each retry).", ge=0, unit="seconds"
    )
    max_backoff_s: float = setting(15.0, help="Longest wait between retries.", ge=0, unit="seconds")
    on_exhausted: str = setting(
        "raise",
        help="""Past the budget: ``"raise"`` (``JudgeUnavailableError``: training stops with the cause) or
        ``"fail"`` (the unanswered samples get the failure reward with the cause, counted).""",
        choices=("raise", "fail"),
    )

    def __post_init__(self) -> None:
        check(self)  # NaN or inf would retry (or wait) forever

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

    def exhausted(self, cause: str, health: JudgeHealth, deadline: float | None, delay: float) -> str:
        """The budget ran out (``health`` counts it): raise, or return the message the unanswered items fail with."""
        health.gave_up()
        failing, budget = health.failing_for(), _secs(self.budget_s)
        # why the retries stop: the budget or the deadline is spent, or the next try would pass it
        budget_end = (self.budget_s - failing, f"the outage budget of {budget}", "is spent")
        deadline_left = math.inf if deadline is None else deadline - time.monotonic()
        deadline_end = (deadline_left, "the reward call's deadline", "passed")
        left, what, spent = min(budget_end, deadline_end, key=lambda end: end[0])  # the nearer (the budget on a tie)
        then = f"the next try, in {_secs(delay)}, would pass"
        why = f"{then} {what} ({_secs(left)} left)" if left > 0 else f"{what} {spent}"
        message = f"the judge has been failing for {_secs(failing)} and {why}; last failure: {cause}"
        if self.on_exhausted == "raise":
            raise JudgeUnavailableError(
                f"{message}. Stopping here rather than training on made-up rewards: bring the judge back (or raise "
                "the outage budget) and resume the run",
                failing_s=failing,
                cause=cause,
            )
        return message


@dataclass(eq=False)
class JudgeHealth:
    """Whether the judge is answering, from what every call saw (thread-safe): ``failed(cause)`` starts or
    continues a failure streak, ``succeeded()`` ends it, ``status()`` says ``ok``/``degraded`` with the cause."""

    failing_since: float | None = None  # monotonic start of the current failure streak
    last_error: str | None = None
    failures: int = 0  # failed judge calls (attempts)
    exhausted: int = 0  # reward calls whose outage budget ran out
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=5))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
class Answered(Generic[T]):
    """What ``ajudge_until_answered`` got: the judge's outputs and the items left unanswered past the budget."""

    parts: list[tuple[list[int], T]] = field(default_factory=list)  # (item indices, output); a later part wins
    outage: dict[int, str] = field(default_factory=dict)  # item left unanswered past the budget -> the reason
    calls: int = 0  # judge calls made (retries included)


async def ajudge_until_answered(
    units: Sequence[Sequence[int]],
    call: Callable[[list[int], float | None], Awaitable[T]],
    failures: Callable[[T], Sequence[JudgeFailure | None]],
    policy: OutagePolicy,
    *,
    deadline: float | None = None,
    health: JudgeHealth | None = None,
) -> Answered[T]:
    """Judge the items of ``units`` (groups judged and retried together) with ``await call(item indices, call
    deadline)``; ask again, per ``policy``, for the units with an item that failed on the transport
    (``failures(output)``: per item, in order), until ``deadline``; ``health`` records failures and successes."""
    health = health if health is not None else JudgeHealth()
    out: Answered[T] = Answered()
    pending = [list(u) for u in units if u]
    attempt = 0
    while pending:
        idx = [i for u in pending for i in u]
        now = time.monotonic()
        # a call's first attempt is always made (a judge that failed through an earlier call may be back);
        # its retries stop at the budget of the streak, counted from its first failure
        stop = policy.retry_until(health.failing_since or now, deadline) if attempt else deadline
        until = min(now + policy.attempt_timeout(now, deadline, math.inf), math.inf if stop is None else stop)
        try:
            result = await call(idx, until if math.isfinite(until) else None)
            per_item = dict(zip(idx, failures(result), strict=True))
        except BackendError as e:  # the whole call failed (a backend without per-request failures)
            per_item = {i: JudgeFailure("transport", str(e)) for i in idx}
        else:
            out.parts.append((idx, result))
        out.calls += 1
        down = {i: f.reason for i, f in per_item.items() if f is not None and f.kind == "transport"}
        failed = [u for u in pending if any(i in down for i in u)]
        if not failed:
            health.succeeded()
            return out
        cause = next(down[i] for u in failed for i in u if i in down)
        health.failed(cause)
        attempt += 1
        delay = policy.delay(attempt)
        stop = policy.retry_until(health.failing_since or time.monotonic(), deadline)
        if time.monotonic() + delay >= stop:
            message = policy.exhausted(cause, health, deadline, delay)
            out.outage.update(dict.fromkeys((i for u in failed for i in u), message))
            logger.error("%d sample(s) got no answer: %s", len(out.outage), message)
            return out
        logger.warning(
            "%d sample(s) not answered (%s); asking again in %.1f s (failing for %s, budget %s)",
            sum(len(u) for u in failed),
            cause,
            delay,
            _secs(health.failing_for()),
            _secs(policy.budget_s),
        )
        await asyncio.sleep(delay)
        pending = failed
    return out


@dataclass
class Outage:
    """An outage policy and the health its calls record: the ``outage=`` of a job's or the probe's judge calls."""

    policy: OutagePolicy
    health: JudgeHealth = field(default_factory=JudgeHealth)

    async def aoutcomes(
        self,
        items: Sequence[Any],
        call: Callable[..., Awaitable[Sequence[J]]],
        failed: Callable[[JudgeFailure], J],
        options: CallOptions,
    ) -> list[J]:
        """One outcome per item, in order: ``await call(part, **options)`` (a judge's item method), each item the
        transport failed asked again within ``options``' deadline. Past the budget (``on_exhausted="fail"``) an item
        keeps its last transport failure, or is ``failed(failure)`` with the outage's cause."""
        rest = {k: v for k, v in options.items() if k != "deadline"}
        answered = await ajudge_until_answered(
            [[i] for i in range(len(items))],
            lambda idx, until: call([items[i] for i in idx], **rest, deadline=until),
            lambda out: [o.error for o in out],
            self.policy,
            deadline=options.get("deadline"),
            health=self.health,
        )
        got = {i: o for idx, out in answered.parts for i, o in zip(idx, out, strict=True)}
        return [
            got[i] if i in got else failed(JudgeFailure("transport", answered.outage[i])) for i in range(len(items))
        ]


def _secs(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds:.2g} s"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
