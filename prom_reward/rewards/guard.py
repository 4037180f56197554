"""One reward call, guarded: a sample that cannot be judged fails alone, a failing judge is retried.

Every reward path (``PrometheusReward`` for TRL, ``OnlineDPOJudgeReward``, and through
``PrometheusReward.judge_batch`` the OpenRLHF server, ``reward_func`` and verl) runs its batched
judge call through ``run_isolated``:

- **Isolation.** A call that raises for a reason tied to its inputs (``InputError``: a lone
  surrogate, an unusable rubric, a prompt over the judge's context with ``over_context="fail"``; a
  4xx from the judge server; any unexpected exception) is split in halves, and the halves are
  judged on their own, down to the single unit (a sample, or a whole ``pairwise_group`` group)
  that fails: that unit fails alone with the reason; its batch-mates are judged.
- **Outages.** A ``BackendError`` (judge unreachable, 5xx, timeouts: the ``openai`` backend has
  already retried each request inside the budget) is retried with back-off while the judge has
  been failing for less than the ``OutagePolicy``'s budget and the deadline has not passed. Past
  it, ``on_exhausted="raise"`` raises ``JudgeUnavailableError`` saying for how long and why;
  ``"fail"`` keeps every sample the judge did answer (re-judged from the answers remembered in the
  call's ``CallScope``, without asking the judge again) and fails the others with the cause.
- Configuration errors (``ConfigError`` ...) are raised: they are no sample's fault.

Example:
    >>> def call(idx):  # the judge chokes on item 2
    ...     if 2 in idx:
    ...         raise ValueError("bad bytes")
    ...     return [i * 10 for i in idx]
    >>> out = run_isolated([[0], [1], [2], [3]], call, OutagePolicy())
    >>> sorted(i for idx, _ in out.parts for i in idx), out.failed
    ([0, 1, 3], {2: 'the sample could not be judged: ValueError: bad bytes'})
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from prom_reward.backends.outage import CallScope, JudgeHealth, OutagePolicy, call_scope
from prom_reward.errors import BackendError, InputError, JudgeUnavailableError, PromRewardError, ServerRejected

T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass
class Isolated(Generic[T]):
    """What ``run_isolated`` got: the judged parts and the items that failed, with their reasons."""

    parts: list[tuple[list[int], T]] = field(default_factory=list)
    """(item indices, the call's output for exactly those items), in the order they were judged."""
    failed: dict[int, str] = field(default_factory=dict)
    """Items that could not be judged (their unit failed alone) -> reason."""
    outage: dict[int, str] = field(default_factory=dict)
    """Items left unanswered when the outage budget ran out (``on_exhausted="fail"``) -> reason."""
    calls: int = 0
    """Judge calls made (splits and retries included)."""


def _item_reason(e: BaseException) -> str:
    if isinstance(e, InputError):
        return str(e)
    if isinstance(e, ServerRejected):
        return f"the judge server rejected the sample: {e}"
    return f"the sample could not be judged: {type(e).__name__}: {e}"


def run_isolated(
    units: Sequence[Sequence[int]],
    call: Callable[[list[int]], T],
    policy: OutagePolicy,
    *,
    deadline: float | None = None,
    health: JudgeHealth | None = None,
) -> Isolated[T]:
    """Judge the items of ``units`` with ``call(item indices) -> output``, isolating failures (module docstring).

    Args:
        units: groups of item indices judged together and failed together (one sample each, or a
            ``pairwise_group`` group).
        call: judges exactly the given items (in that order) and returns its output for them.
        policy: the outage policy.
        deadline: monotonic time after which the judge is not asked again (the caller's deadline).
        health: where failures and successes are recorded (a fresh one when None).
    """
    health = health if health is not None else JudgeHealth()
    scope = CallScope(policy, deadline, health)
    out: Isolated[T] = Isolated()
    queue: deque[list[list[int]]] = deque([[list(u) for u in units]] if units else [])
    attempt = 0
    with call_scope(scope):
        while queue:
            part = queue.popleft()
            idx = [i for u in part for i in u]
            out.calls += 1
            scope.begin_pass()
            try:
                result = call(idx)
            except (InputError, ServerRejected) as e:
                _split_or_fail(part, e, queue, out)
            except BackendError as e:
                health.failed(str(e))
                attempt += 1
                delay = policy.delay(attempt)
                stop = policy.retry_until(health.failing_since or time.monotonic(), deadline)
                if time.monotonic() + delay < stop:
                    logger.warning(
                        "judge call failed (%s); retrying in %.1f s (failing for %s, budget %s)",
                        e,
                        delay,
                        _secs(health.failing_for()),
                        _secs(policy.budget_s),
                    )
                    time.sleep(delay)
                    queue.appendleft(part)
                    continue
                _exhausted(e, [part, *queue], call, scope, out, deadline)
                queue.clear()
            except PromRewardError:
                raise  # configuration: no sample's fault
            except Exception as e:  # noqa: BLE001 - an unknown failure is isolated like a bad input
                if len(idx) == 1:
                    logger.exception("sample %d could not be judged", idx[0])
                _split_or_fail(part, e, queue, out)
            else:
                attempt = 0
                health.succeeded()
                out.parts.append((idx, result))
    return out


def _split_or_fail(part: list[list[int]], e: BaseException, queue: deque[list[list[int]]], out: Isolated[T]) -> None:
    if len(part) > 1:
        mid = len(part) // 2
        queue.appendleft(part[mid:])
        queue.appendleft(part[:mid])
        return
    reason = _item_reason(e)
    for i in part[0]:
        out.failed[i] = reason
    logger.warning("%d sample(s) failed alone: %s", len(part[0]), reason)


def _exhausted(
    e: BackendError,
    rest: list[list[list[int]]],
    call: Callable[[list[int]], T],
    scope: CallScope,
    out: Isolated[T],
    deadline: float | None,
) -> None:
    """The outage budget ran out: raise, or keep what the judge answered and fail the rest."""
    health, policy = scope.health, scope.policy
    health.gave_up()
    failing = health.failing_for()
    by_deadline = deadline is not None and deadline < (health.failing_since or time.monotonic()) + policy.budget_s
    limit = "the reward call's deadline passed" if by_deadline else f"the outage budget is {_secs(policy.budget_s)}"
    message = f"the judge has been failing for {_secs(failing)} and {limit}; last error: {e}"
    if policy.on_exhausted == "raise":
        raise JudgeUnavailableError(
            f"{message}. Stopping here rather than training on made-up rewards: bring the judge back (or raise "
            "the outage budget) and resume the run",
            failing_s=failing,
            cause=str(e),
        ) from e
    scope.offline = True  # only what the judge already answered, from the scope's memo
    for part in rest:
        for unit in part:
            scope.begin_pass()
            try:
                out.parts.append((list(unit), call(list(unit))))
            except Exception:  # noqa: BLE001 - not answered: fails with the outage's reason
                for i in unit:
                    out.outage[i] = message
    logger.error("%d sample(s) got no answer: %s", len(out.outage), message)


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
