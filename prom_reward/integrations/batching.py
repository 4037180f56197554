"""``MicroBatcher``: gather concurrent requests into one batched call.

Reward integrations receive work one sample at a time (OpenRLHF posts one sample per HTTP
request; verl awaits one ``compute_score`` per sample), while a vLLM judge is fast only on
batches. A ``MicroBatcher`` owns one dispatcher thread: requests submitted from any thread
or event loop wait up to ``max_wait_s`` for company (or until ``max_batch_size`` items are
queued), then go to ``fn`` together, and each request gets back its own slice.

- Up to ``max_concurrent`` batches run at once (worker threads): a slow or hung call holds one
  slot while later requests go out in the next. While every slot is busy, requests keep
  queueing, so the next batch is bigger (with ``max_concurrent=1``, one call at a time).
- ``max_batch_size`` holds inside one request too: a request with more items is split into
  calls of at most that many and answered as one (a group of ``group_size`` goes whole).

- A request whose future is cancelled (its client went away) before its batch starts is
  dropped, not judged; one whose ``timeout`` passed before its batch starts fails with
  ``DeadlineExceeded`` without being judged.
- With ``group_size``, requests carry a group key (e.g. the prompt) and wait until their
  group has ``group_size`` items (or ``group_wait_s`` passed since the group's first item),
  so a pairwise-within-group reward sees whole groups.
- ``fn`` raising fails every request of that batch with the same exception (the reward's
  ``fn`` isolates bad samples itself and raises only to stop training).
- ``stats`` counts requests, items, batches and keeps the recent batch sizes.

Example:
    >>> import concurrent.futures as cf
    >>> calls = []
    >>> def double(items):
    ...     calls.append(len(items))
    ...     return [2 * x for x in items]
    >>> b = MicroBatcher(double, max_wait_s=0.2)
    >>> with cf.ThreadPoolExecutor(4) as pool:
    ...     out = list(pool.map(lambda x: b.run([x]), range(4)))
    >>> out, sum(calls), b.stats.items
    ([[0], [2], [4], [6]], 4, 4)
    >>> b.close()
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from prom_reward.errors import ConfigError, PromRewardError

T = TypeVar("T")
R = TypeVar("R")
logger = logging.getLogger(__name__)


class DeadlineExceeded(PromRewardError):
    """A request's deadline passed before its batch started (it was not judged)."""


@dataclass
class BatcherStats:
    """Counters of a ``MicroBatcher`` (read them at any time)."""

    requests: int = 0
    """Requests submitted."""
    items: int = 0
    """Items submitted."""
    batches: int = 0
    """Calls of the batch function."""
    batched_items: int = 0
    """Items passed to the batch function (cancelled and expired ones excluded)."""
    max_batch: int = 0
    """Largest batch so far, in items."""
    cancelled: int = 0
    """Requests dropped unjudged because their caller cancelled (client gone)."""
    expired: int = 0
    """Requests failed unjudged because their deadline passed while queued."""
    failed_batches: int = 0
    """Batches whose function raised."""
    split_requests: int = 0
    """Requests larger than ``max_batch_size``, split into several calls."""
    in_flight: int = 0
    """Batches running now."""
    max_in_flight: int = 0
    """Most batches that ran at once."""
    recent_batch_sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1000))
    """Sizes of the last 1,000 batches."""

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "recent_batch_sizes"}
        d["recent_batch_sizes"] = list(self.recent_batch_sizes)
        return d


@dataclass
class _Request(Generic[T]):
    items: list[T]
    future: cf.Future
    deadline: float | None
    group: Hashable | None
    arrived: float


class MicroBatcher(Generic[T, R]):
    """Batch concurrent calls of ``fn(items) -> results`` (one result per item, same order).

    Args:
        fn: the batch function; called from the dispatcher thread (or, with ``max_concurrent`` > 1,
            from worker threads, that many calls at once).
        max_wait_s: how long the first request of a batch waits for others.
        max_batch_size: a batch stops gathering at this many items; a larger request is split
            (a grouped one goes whole).
        group_size: hold grouped requests until their group has this many items.
        group_wait_s: ... or until this long after the group's first item arrived.
        max_concurrent: batches in flight at once.
        name: used in the dispatcher thread's name and in log lines.
    """

    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        *,
        max_wait_s: float = 0.02,
        max_batch_size: int = 256,
        group_size: int | None = None,
        group_wait_s: float = 60.0,
        max_concurrent: int = 1,
        name: str = "judge",
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"fn: expected a callable batch function, got {type(fn).__name__}")
        if not (isinstance(max_wait_s, (int, float)) and max_wait_s >= 0):
            raise ConfigError(f"max_wait_s: expected a number of seconds >= 0, got {max_wait_s!r}")
        if not (isinstance(max_batch_size, int) and max_batch_size >= 1):
            raise ConfigError(f"max_batch_size: expected an int >= 1, got {max_batch_size!r}")
        if group_size is not None and not (isinstance(group_size, int) and group_size >= 1):
            raise ConfigError(f"group_size: expected None or an int >= 1, got {group_size!r}")
        if not (isinstance(group_wait_s, (int, float)) and group_wait_s >= 0):
            raise ConfigError(f"group_wait_s: expected a number of seconds >= 0, got {group_wait_s!r}")
        if not (isinstance(max_concurrent, int) and max_concurrent >= 1):
            raise ConfigError(f"max_concurrent: expected an int >= 1, got {max_concurrent!r}")
        self.fn, self.max_wait_s, self.max_batch_size = fn, float(max_wait_s), max_batch_size
        self.group_size, self.group_wait_s, self.name = group_size, float(group_wait_s), name
        self.stats = BatcherStats()
        self._cond = threading.Condition()
        self._ready: collections.deque[_Request] = collections.deque()
        self._groups: dict[Hashable, list[_Request]] = {}
        self._closed = False
        self.max_concurrent = max_concurrent
        self._slots = threading.Semaphore(max_concurrent)
        self._pool = (
            cf.ThreadPoolExecutor(max_concurrent, thread_name_prefix=f"prom-reward-{name}")
            if max_concurrent > 1
            else None
        )
        self._thread = threading.Thread(target=self._loop, name=f"prom-reward-{name}-batcher", daemon=True)
        self._thread.start()

    # -- submitting -------------------------------------------------------------------
    def submit(self, items: Sequence[T], *, timeout: float | None = None, group: Hashable | None = None) -> cf.Future:
        """Queue ``items``; the future resolves to their results (a list, same order).

        ``timeout``: seconds from now after which, if its batch has not started, the request
        fails with ``DeadlineExceeded``. ``group``: the group key (used with ``group_size``).
        """
        items = list(items)
        deadline = None if timeout is None else time.monotonic() + timeout
        grouped = self.group_size is not None and group is not None
        with self._cond:
            if self._closed:
                raise PromRewardError(f"the {self.name} batcher is closed; create a new one")
            self.stats.requests += 1
            self.stats.items += len(items)
            if len(items) <= self.max_batch_size or grouped:
                return self._queue(items, deadline, group)
            self.stats.split_requests += 1
            size = self.max_batch_size
            parts = [self._queue(items[k : k + size], deadline, None) for k in range(0, len(items), size)]
        return _joined(parts)

    def _queue(self, items: list[T], deadline: float | None, group: Hashable | None) -> cf.Future:
        """Queue one request (the condition's lock is held)."""
        fut: cf.Future = cf.Future()
        req = _Request(items, fut, deadline, group, time.monotonic())
        if not req.items:
            fut.set_result([])
            return fut
        if self.group_size is not None and group is not None:
            self._groups.setdefault(group, []).append(req)
            self._promote_groups(time.monotonic())
        else:
            self._ready.append(req)
        self._cond.notify_all()
        return fut

    def run(self, items: Sequence[T], *, timeout: float | None = None, group: Hashable | None = None) -> list[R]:
        """Blocking form of ``submit`` (for worker threads)."""
        return self.submit(items, timeout=timeout, group=group).result()

    async def arun(self, items: Sequence[T], *, timeout: float | None = None, group: Hashable | None = None) -> list[R]:
        """Awaitable form; cancelling the awaiting task drops the request if its batch has not started."""
        fut = self.submit(items, timeout=timeout, group=group)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def close(self) -> None:
        """Stop the dispatcher after the queued requests are served."""
        with self._cond:
            self._closed = True
            for reqs in self._groups.values():
                self._ready.extend(reqs)
            self._groups.clear()
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=600)
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    # -- dispatching ------------------------------------------------------------------
    def _promote_groups(self, now: float) -> float | None:
        """Move complete or timed-out groups to the ready queue; return the next group wake-up time."""
        wake = None
        for key in list(self._groups):
            reqs = self._groups[key]
            size = sum(len(r.items) for r in reqs)
            due = reqs[0].arrived + self.group_wait_s
            if size >= (self.group_size or 1) or now >= due or self._closed:
                self._ready.extend(reqs)
                del self._groups[key]
            else:
                wake = due if wake is None else min(wake, due)
        return wake

    def _gather(self) -> list[_Request] | None:
        """Wait for a batch: the first ready request, then company until the window or cap."""
        with self._cond:
            while True:
                wake = self._promote_groups(time.monotonic())
                if self._ready:
                    break
                if self._closed:
                    return None
                self._cond.wait(None if wake is None else max(wake - time.monotonic(), 0.001))
            batch = [self._ready.popleft()]
            size = len(batch[0].items)
            window_end = time.monotonic() + self.max_wait_s
            while size < self.max_batch_size:
                self._promote_groups(time.monotonic())
                if self._ready:
                    nxt = self._ready[0]
                    if size + len(nxt.items) > self.max_batch_size:
                        break
                    batch.append(self._ready.popleft())
                    size += len(nxt.items)
                    continue
                left = window_end - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._cond.wait(left)
            return batch

    def _loop(self) -> None:
        while True:
            self._slots.acquire()  # while every slot is busy, requests keep queueing: a bigger next batch
            batch = self._gather()
            if batch is None:
                self._slots.release()
                return
            live = self._live(batch)
            if not live:
                self._slots.release()
                continue
            if self._pool is None:
                self._run(live)
            else:
                self._pool.submit(self._run, live)

    def _live(self, batch: list[_Request]) -> list[_Request]:
        """The requests of ``batch`` still wanted: cancelled ones dropped, expired ones failed."""
        now = time.monotonic()
        live = []
        for req in batch:
            if not req.future.set_running_or_notify_cancel():
                self.stats.cancelled += 1
            elif req.deadline is not None and now > req.deadline:
                self.stats.expired += 1
                waited = now - req.arrived
                req.future.set_exception(
                    DeadlineExceeded(
                        f"the request waited {waited:.1f} s in the {self.name} queue, past its deadline of "
                        f"{req.deadline - req.arrived:.1f} s, and was not judged; the judge is slower than "
                        "the requests arrive: add judge replicas, lower the rollout batch, or raise the deadline"
                    )
                )
            else:
                live.append(req)
        return live

    def _run(self, live: list[_Request]) -> None:
        """Call ``fn`` on the items of ``live`` and hand each request its slice; frees the slot."""
        items = [x for req in live for x in req.items]
        with self._cond:
            s = self.stats
            s.batches += 1
            s.batched_items += len(items)
            s.max_batch = max(s.max_batch, len(items))
            s.recent_batch_sizes.append(len(items))
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
        try:
            results = list(self.fn(items))
            if len(results) != len(items):
                raise PromRewardError(
                    f"the {self.name} batch function returned {len(results)} results for "
                    f"{len(items)} items; it must return one per item"
                )
        except BaseException as e:  # noqa: BLE001 - every waiting caller must hear about it
            with self._cond:
                self.stats.failed_batches += 1
            logger.error("%s batch of %d items failed: %s", self.name, len(items), e)
            for req in live:
                req.future.set_exception(e)
        else:
            pos = 0
            for req in live:
                req.future.set_result(results[pos : pos + len(req.items)])
                pos += len(req.items)
        finally:
            with self._cond:
                self.stats.in_flight -= 1
            self._slots.release()


def _joined(parts: list[cf.Future]) -> cf.Future:
    """One future for the parts of a split request: their results concatenated, or the first failure;
    cancelling it cancels the parts that have not started."""
    outer: cf.Future = cf.Future()
    lock = threading.Lock()

    def part_done(_: cf.Future) -> None:
        with lock:
            if outer.done() or not all(p.done() for p in parts):
                return
            failed = next((p for p in parts if p.cancelled() or p.exception() is not None), None)
            if failed is None:
                outer.set_result([x for p in parts for x in p.result()])
            elif failed.cancelled():
                outer.cancel()
            else:
                outer.set_exception(failed.exception())

    def outer_done(f: cf.Future) -> None:
        if f.cancelled():
            for p in parts:
                p.cancel()

    outer.add_done_callback(outer_done)
    for p in parts:
        p.add_done_callback(part_done)
    return outer
