"""``MicroBatcher``: gather concurrent requests into batched calls on the caller's event loop (up to
``max_wait_s`` or ``max_batch_size``, ``max_concurrent`` batches in flight, whole groups with ``group_size``).
Its rules are in docs/design-notes.md."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Generic, TypeVar

from prom_reward.errors import PromRewardError

T = TypeVar("T")
R = TypeVar("R")
logger = logging.getLogger(__name__)


class DeadlineExceeded(PromRewardError):
    """A request's deadline passed before its batch started (it was not judged)."""


@dataclass
class BatcherStats:
    """Counters of a ``MicroBatcher`` (read them at any time)."""

    requests: int = 0
    items: int = 0
    batches: int = 0
    batched_items: int = 0
    """Items passed to the batch function (cancelled and expired ones excluded)."""
    max_batch: int = 0
    cancelled: int = 0
    """Requests dropped unjudged because their caller cancelled (client gone)."""
    expired: int = 0
    """Requests failed unjudged because their deadline passed while queued."""
    failed_batches: int = 0
    split_requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    recent_batch_sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1000))

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "recent_batch_sizes": list(self.recent_batch_sizes)}


@dataclass
class _Request:
    items: list[Any]
    future: asyncio.Future
    deadline: float | None
    arrived: float


class _Lane:
    """The queue of one event loop: ready requests, waiting groups, the batch slots, its tasks."""

    def __init__(self, slots: int) -> None:
        self.ready: collections.deque[_Request] = collections.deque()
        self.groups: dict[Hashable, list[_Request]] = {}
        self.wake = asyncio.Event()
        self.slots = asyncio.Semaphore(slots)
        self.dispatcher: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()  # running batches, held until done


@dataclass(eq=False)
class MicroBatcher(Generic[T, R]):
    """Batch concurrent awaits of ``fn(items) -> results`` (one result per item, same order): a batch's first
    request waits ``max_wait_s`` for others, up to ``max_batch_size`` items (a larger ungrouped request is split);
    grouped requests wait for ``group_size`` items or ``group_wait_s``; ``max_concurrent`` batches at once."""

    fn: Callable[[list[T]], Awaitable[Sequence[R]]]
    _: KW_ONLY
    max_wait_s: float = 0.02
    max_batch_size: int = 256
    group_size: int | None = None
    group_wait_s: float = 60.0
    max_concurrent: int = 1
    stats: BatcherStats = field(default_factory=BatcherStats, init=False)
    _lanes: dict[asyncio.AbstractEventLoop, _Lane] = field(default_factory=dict, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    async def arun(self, items: Sequence[T], *, timeout: float | None = None, group: Hashable | None = None) -> list[R]:
        """The results of ``items`` (of group ``group``), batched with concurrent requests; past ``timeout`` s
        unstarted: ``DeadlineExceeded``; a cancelled caller's request is dropped if not started."""
        if self._closed:
            raise PromRewardError("the judge batcher is closed; create a new one")
        items = list(items)
        deadline = None if timeout is None else time.monotonic() + timeout
        grouped = self.group_size is not None and group is not None
        self.stats.requests += 1
        self.stats.items += len(items)
        if not items:
            return []
        loop = asyncio.get_running_loop()
        for old in [k for k in self._lanes if k.is_closed()]:
            self._lanes.pop(old, None)
        lane = self._lanes.get(loop) or self._lanes.setdefault(loop, _Lane(self.max_concurrent))
        if len(items) <= self.max_batch_size or grouped:
            return await self._queue(lane, items, deadline, group if grouped else None)
        self.stats.split_requests += 1
        size = self.max_batch_size
        parts = [self._queue(lane, items[k : k + size], deadline, None) for k in range(0, len(items), size)]
        return [x for part in await asyncio.gather(*parts) for x in part]

    def close(self) -> None:
        """Refuse new requests; the queued ones (groups included) are still served. Callable from any thread."""
        self._closed = True
        for loop, lane in list(self._lanes.items()):
            if not loop.is_closed():
                loop.call_soon_threadsafe(lane.wake.set)

    # -- queueing ---------------------------------------------------------------------
    def _queue(self, lane: _Lane, items: list[T], deadline: float | None, group: Hashable | None) -> asyncio.Future:
        req = _Request(items, asyncio.get_running_loop().create_future(), deadline, time.monotonic())
        if group is not None:
            lane.groups.setdefault(group, []).append(req)
        else:
            lane.ready.append(req)
        lane.wake.set()
        if lane.dispatcher is None:
            lane.dispatcher = asyncio.get_running_loop().create_task(self._dispatch(lane))
        return req.future

    # -- dispatching ------------------------------------------------------------------
    def _promote(self, lane: _Lane) -> float | None:
        """Move complete or timed-out groups to the ready queue; return the next group wake-up time."""
        now, wake = time.monotonic(), None
        for key, reqs in list(lane.groups.items()):
            due = reqs[0].arrived + self.group_wait_s
            if sum(len(r.items) for r in reqs) >= (self.group_size or 1) or now >= due or self._closed:
                lane.ready.extend(reqs)
                del lane.groups[key]
            else:
                wake = due if wake is None else min(wake, due)
        return wake

    async def _sleep(self, lane: _Lane, seconds: float | None) -> None:
        lane.wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await lane.wake.wait()

    async def _gather(self, lane: _Lane) -> list[_Request]:
        """A batch: the first ready request, then company until the window or cap; [] when nothing is queued."""
        while not lane.ready:
            wake = self._promote(lane)
            if lane.ready:
                break
            if not lane.groups:
                return []
            await self._sleep(lane, max(wake - time.monotonic(), 0.001) if wake is not None else None)
        batch = [lane.ready.popleft()]
        size = len(batch[0].items)
        window_end = time.monotonic() + self.max_wait_s
        while size < self.max_batch_size:
            self._promote(lane)
            if lane.ready:
                if size + len(lane.ready[0].items) > self.max_batch_size:
                    break
                batch.append(lane.ready.popleft())
                size += len(batch[-1].items)
                continue
            left = window_end - time.monotonic()
            if left <= 0 or self._closed:
                break
            await self._sleep(lane, left)
        return batch

    async def _dispatch(self, lane: _Lane) -> None:
        try:
            while True:
                await lane.slots.acquire()  # while every slot is busy, requests keep queueing: a bigger next batch
                batch = await self._gather(lane)
                live = self._live(batch)
                if not live:
                    lane.slots.release()
                    if not batch:  # nothing queued: the dispatcher ends (the next request starts one)
                        return
                    continue
                task = asyncio.get_running_loop().create_task(self._call(lane, live))
                lane.tasks.add(task)
                task.add_done_callback(lane.tasks.discard)
        finally:
            lane.dispatcher = None

    def _live(self, batch: list[_Request]) -> list[_Request]:
        now, live = time.monotonic(), []
        for req in batch:
            if req.future.done():
                self.stats.cancelled += 1
            elif req.deadline is not None and now > req.deadline:
                self.stats.expired += 1
                req.future.set_exception(
                    DeadlineExceeded(
                        f"the request waited {now - req.arrived:.1f} s in the judge queue, past its deadline "
                        f"of {req.deadline - req.arrived:.1f} s, and was not judged; the judge is slower than "
                        "the requests arrive: add judge replicas, lower the rollout batch, or raise the deadline"
                    )
                )
            else:
                live.append(req)
        return live

    async def _call(self, lane: _Lane, live: list[_Request]) -> None:
        """Await ``fn`` on the items of ``live`` and hand each request its slice; frees the slot."""
        items = [x for req in live for x in req.items]
        s = self.stats
        s.batches += 1
        s.batched_items += len(items)
        s.max_batch = max(s.max_batch, len(items))
        s.recent_batch_sizes.append(len(items))
        s.in_flight += 1
        s.max_in_flight = max(s.max_in_flight, s.in_flight)
        try:
            results = list(await self.fn(items))
            if len(results) != len(items):
                raise PromRewardError(
                    f"the judge batch function returned {len(results)} results for "
                    f"{len(items)} items; it must return one per item"
                )
        except BaseException as e:  # noqa: BLE001 - every waiting caller must hear about it
            s.failed_batches += 1
            logger.error("judge batch of %d items failed: %r", len(items), e)
            for req in live:
                if not req.future.done():
                    if isinstance(e, asyncio.CancelledError):
                        req.future.cancel()
                    else:
                        req.future.set_exception(e)
            if not isinstance(e, Exception):
                raise
        else:
            pos = 0
            for req in live:
                if not req.future.done():
                    req.future.set_result(results[pos : pos + len(req.items)])
                pos += len(req.items)
        finally:
            s.in_flight -= 1
            lane.slots.release()
