"""``MicroBatcher`` on its own (asyncio, on the caller's loop): ordering, cancellation, deadlines, groups, the batch
cap inside a request, concurrent batches, a hung batch, failures, sync callers through the bridge (issues 26, 31)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading

import pytest

from prom_reward.backends.bridge import run_sync
from prom_reward.errors import PromRewardError
from prom_reward.integrations.batching import DeadlineExceeded, MicroBatcher


class Recorder:
    """An async batch function that doubles its items, records each call and its thread, and can be held on a
    gate (every call, or the first only)."""

    def __init__(self, gate: asyncio.Event | None = None, hold_first: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.threads: set[int] = set()
        self.gate, self.hold_first = gate, hold_first

    async def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        self.threads.add(threading.get_ident())
        if self.gate is not None and (len(self.calls) == 1 or not self.hold_first):
            await asyncio.wait_for(self.gate.wait(), 10)
        return [2 * x for x in items]


def started(coro) -> asyncio.Task:
    return asyncio.ensure_future(coro)


def test_concurrent_requests_get_their_own_results_in_order_on_the_callers_thread():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.2)
    threads = threading.active_count()

    async def main():
        return await asyncio.gather(*(b.arun([k, k + 100]) for k in range(6)))

    assert asyncio.run(main()) == [[2 * k, 2 * (k + 100)] for k in range(6)]
    assert fn.calls == [[k + d for k in range(6) for d in (0, 100)]]  # one batch, in arrival order
    assert fn.threads == {threading.get_ident()} and threading.active_count() == threads  # no thread of its own
    assert (b.stats.requests, b.stats.items, b.stats.batches) == (6, 12, 1)


def test_sync_callers_in_threads_meet_on_the_library_loop():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.2)
    with cf.ThreadPoolExecutor(6) as pool:
        out = list(pool.map(lambda k: run_sync(lambda: b.arun([k])), range(6)))
    assert out == [[2 * k] for k in range(6)]
    assert b.stats.batches < 6 and sum(map(len, fn.calls)) == 6
    assert len(fn.threads) == 1 and threading.get_ident() not in fn.threads  # the bridge's loop thread


def test_each_event_loop_has_its_own_queue():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0)
    assert [asyncio.run(b.arun([k])) for k in range(3)] == [[0], [2], [4]]  # a fresh loop each time
    assert fn.calls == [[0], [1], [2]] and len(b._lanes) == 1  # the closed loops' lanes were dropped


def test_a_request_over_the_cap_is_split_and_answered_as_one():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=3)
    assert asyncio.run(b.arun(list(range(10)))) == [2 * x for x in range(10)]
    assert max(map(len, fn.calls)) <= 3 and sum(map(len, fn.calls)) == 10
    assert b.stats.split_requests == 1 and b.stats.max_batch <= 3


@pytest.mark.parametrize("second, cancelled", [([2], 1), ([1, 2, 3, 4, 5], 3)])  # a split request: each part
def test_a_cancelled_request_is_not_judged(second, cancelled):
    async def main():
        fn = Recorder(asyncio.Event())
        b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=2)
        first = started(b.arun([0]))
        await asyncio.sleep(0.1)  # the first batch is in fn, held by the gate
        impatient = started(b.arun(second))
        await asyncio.sleep(0.1)
        impatient.cancel()
        with pytest.raises(asyncio.CancelledError):
            await impatient
        fn.gate.set()
        assert await first == [0]
        await asyncio.sleep(0.1)
        return fn, b

    fn, b = asyncio.run(main())
    assert fn.calls == [[0]] and b.stats.cancelled == cancelled and b.stats.batches == 1


def test_a_request_past_its_deadline_fails_unjudged():
    async def main():
        fn = Recorder(asyncio.Event())
        b = MicroBatcher(fn, max_wait_s=0.0)
        first = started(b.arun([1]))
        await asyncio.sleep(0.1)
        late = started(b.arun([2], timeout=0.1))
        await asyncio.sleep(0.3)
        fn.gate.set()
        with pytest.raises(DeadlineExceeded, match="past its deadline"):
            await late
        assert await first == [2]
        return fn, b

    fn, b = asyncio.run(main())
    assert fn.calls == [[1]] and b.stats.expired == 1


def test_groups_wait_for_their_members_or_the_group_wait():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, group_size=3, group_wait_s=0.5)

    async def main():
        a, c = started(b.arun([1], group="p")), started(b.arun([10], group="q"))
        await asyncio.sleep(0.1)
        assert not a.done() and not c.done()  # each group waits for its members
        rest = await asyncio.gather(b.arun([2], group="p"), b.arun([3], group="p"))
        assert [await a, *rest] == [[2], [4], [6]]
        assert sorted(fn.calls[0]) == [1, 2, 3]  # the whole group in one call
        assert not c.done()
        assert await c == [20]  # a short group goes after group_wait_s

    asyncio.run(main())


def test_a_grouped_request_over_the_cap_goes_whole():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=2, group_size=4)
    assert asyncio.run(b.arun([1, 2, 3, 4], group="p")) == [2, 4, 6, 8]
    assert fn.calls == [[1, 2, 3, 4]] and b.stats.split_requests == 0


def test_a_hung_batch_does_not_hold_the_next_with_concurrent_slots():
    async def main():
        fn = Recorder(asyncio.Event(), hold_first=True)
        b = MicroBatcher(fn, max_wait_s=0.0, max_concurrent=2)
        hung = started(b.arun([1]))
        await asyncio.sleep(0.1)
        assert await asyncio.wait_for(b.arun([2]), 1.0) == [4]  # answered while the first call hangs
        assert not hung.done()
        fn.gate.set()
        assert await hung == [2]
        return b

    assert asyncio.run(main()).stats.max_in_flight == 2


def test_one_slot_queues_requests_into_a_bigger_next_batch():
    async def main():
        fn = Recorder(asyncio.Event(), hold_first=True)
        b = MicroBatcher(fn, max_wait_s=0.0, max_concurrent=1)
        first = started(b.arun([0]))
        await asyncio.sleep(0.1)
        later = [started(b.arun([k])) for k in range(1, 5)]
        await asyncio.sleep(0.2)
        assert not any(t.done() for t in later)
        fn.gate.set()
        assert [await t for t in [first, *later]] == [[0], [2], [4], [6], [8]]
        return fn, b

    fn, b = asyncio.run(main())
    assert fn.calls == [[0], [1, 2, 3, 4]] and b.stats.max_in_flight == 1


def test_a_failing_batch_fails_only_its_requests():
    async def fn(items):
        if 13 in items:
            raise RuntimeError("unlucky batch")
        return items

    b = MicroBatcher(fn, max_wait_s=0.0)
    with pytest.raises(RuntimeError, match="unlucky"):
        asyncio.run(b.arun([13]))
    assert asyncio.run(b.arun([1, 2])) == [1, 2]
    assert b.stats.failed_batches == 1


def test_a_function_returning_the_wrong_count_fails_the_batch():
    async def fn(items):
        return items[:-1]

    with pytest.raises(PromRewardError, match="returned 1 results for 2 items"):
        asyncio.run(MicroBatcher(fn, max_wait_s=0.0).arun([1, 2]))


def test_close_serves_the_queue_and_waiting_groups_and_refuses_new_requests():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.3, group_size=4, group_wait_s=60)

    async def main():
        pending, grouped = started(b.arun([5])), started(b.arun([6], group="p"))
        await asyncio.sleep(0.05)
        b.close()
        assert await asyncio.wait_for(asyncio.gather(pending, grouped), 5) == [[10], [12]]
        with pytest.raises(PromRewardError, match="closed"):
            await b.arun([1])

    asyncio.run(main())
