"""``MicroBatcher`` on its own: ordering, cancellation, deadlines, groups, the batch cap inside a request,
concurrent batches, failures (issue 26)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time

import pytest

from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.integrations.batching import DeadlineExceeded, MicroBatcher


class Recorder:
    """A batch function that doubles its items, records each call, and can be held on a gate."""

    def __init__(self, gate: threading.Event | None = None, hold_first: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.gate = gate
        self.hold_first = hold_first
        self.lock = threading.Lock()

    def __call__(self, items: list[int]) -> list[int]:
        with self.lock:
            self.calls.append(list(items))
            first = len(self.calls) == 1
        if self.gate is not None and (first or not self.hold_first):
            assert self.gate.wait(10)
        return [2 * x for x in items]


def test_concurrent_requests_get_their_own_results_in_order():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.2)
    with cf.ThreadPoolExecutor(6) as pool:
        out = list(pool.map(lambda k: b.run([k, k + 100]), range(6)))
    b.close()
    assert out == [[2 * k, 2 * (k + 100)] for k in range(6)]
    assert b.stats.requests == 6 and b.stats.items == 12 and sum(map(len, fn.calls)) == 12
    assert b.stats.batches < 6  # they met in batches


def test_a_request_over_the_cap_is_split_and_answered_as_one():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=3)
    out = b.run(list(range(10)))
    b.close()
    assert out == [2 * x for x in range(10)]
    assert max(map(len, fn.calls)) <= 3 and sum(map(len, fn.calls)) == 10
    assert b.stats.split_requests == 1 and b.stats.max_batch <= 3


def test_a_cancelled_request_is_not_judged():
    gate = threading.Event()
    fn = Recorder(gate)
    b = MicroBatcher(fn, max_wait_s=0.0)
    first = b.submit([1])
    time.sleep(0.2)  # the first batch is in fn, held by the gate
    second = b.submit([2])
    assert second.cancel()
    gate.set()
    assert first.result(10) == [2]
    b.close()
    assert fn.calls == [[1]] and b.stats.cancelled == 1


def test_a_cancelled_split_request_cancels_its_parts():
    gate = threading.Event()
    fn = Recorder(gate)
    b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=2)
    b.submit([0])
    time.sleep(0.2)
    big = b.submit([1, 2, 3, 4, 5])
    assert big.cancel()
    gate.set()
    b.close()
    assert fn.calls == [[0]] and b.stats.cancelled == 3


def test_awaiting_task_cancelled_drops_its_request():
    gate = threading.Event()
    fn = Recorder(gate)
    b = MicroBatcher(fn, max_wait_s=0.0)
    b.submit([1])
    time.sleep(0.2)

    async def impatient():
        task = asyncio.ensure_future(b.arun([2]))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(impatient())
    gate.set()
    b.close()
    assert fn.calls == [[1]] and b.stats.cancelled == 1


def test_a_request_past_its_deadline_fails_unjudged():
    gate = threading.Event()
    fn = Recorder(gate)
    b = MicroBatcher(fn, max_wait_s=0.0)
    b.submit([1])
    time.sleep(0.2)
    late = b.submit([2], timeout=0.1)
    time.sleep(0.3)
    gate.set()
    with pytest.raises(DeadlineExceeded, match="past its deadline"):
        late.result(10)
    b.close()
    assert fn.calls == [[1]] and b.stats.expired == 1


def test_groups_wait_for_their_members_or_the_group_wait():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, group_size=3, group_wait_s=0.5)
    a = b.submit([1], group="p")
    c = b.submit([10], group="q")
    time.sleep(0.1)
    assert not a.done() and not c.done()  # each group waits for its members
    a2, a3 = b.submit([2], group="p"), b.submit([3], group="p")
    assert (a.result(5), a2.result(5), a3.result(5)) == ([2], [4], [6])
    assert sorted(fn.calls[0]) == [1, 2, 3]  # the whole group in one call
    assert c.result(5) == [20]  # a short group goes after group_wait_s
    b.close()


def test_a_grouped_request_over_the_cap_goes_whole():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.0, max_batch_size=2, group_size=4)
    assert b.run([1, 2, 3, 4], group="p") == [2, 4, 6, 8]
    b.close()
    assert fn.calls == [[1, 2, 3, 4]] and b.stats.split_requests == 0


def test_a_slow_batch_does_not_hold_the_next_with_concurrent_slots():
    gate = threading.Event()
    fn = Recorder(gate, hold_first=True)
    b = MicroBatcher(fn, max_wait_s=0.0, max_concurrent=2)
    slow = b.submit([1])
    time.sleep(0.2)
    start = time.monotonic()
    assert b.run([2]) == [4]  # answered while the first call is still held
    assert time.monotonic() - start < 1.0 and not slow.done()
    gate.set()
    assert slow.result(10) == [2]
    b.close()
    assert b.stats.max_in_flight == 2


def test_one_slot_queues_requests_into_a_bigger_next_batch():
    gate = threading.Event()
    fn = Recorder(gate, hold_first=True)
    b = MicroBatcher(fn, max_wait_s=0.0, max_concurrent=1)
    b.submit([0])
    time.sleep(0.2)
    later = [b.submit([k]) for k in range(1, 5)]
    time.sleep(0.2)
    assert not any(f.done() for f in later)
    gate.set()
    assert [f.result(10) for f in later] == [[2], [4], [6], [8]]
    b.close()
    assert fn.calls == [[0], [1, 2, 3, 4]] and b.stats.max_in_flight == 1


def test_a_failing_batch_fails_only_its_requests():
    def fn(items):
        if 13 in items:
            raise RuntimeError("unlucky batch")
        return items

    b = MicroBatcher(fn, max_wait_s=0.0)
    with pytest.raises(RuntimeError, match="unlucky"):
        b.run([13])
    assert b.run([1, 2]) == [1, 2]
    b.close()
    assert b.stats.failed_batches == 1


def test_a_function_returning_the_wrong_count_fails_the_batch():
    b = MicroBatcher(lambda items: items[:-1], max_wait_s=0.0)
    with pytest.raises(PromRewardError, match="returned 1 results for 2 items"):
        b.run([1, 2])
    b.close()


def test_close_serves_the_queue_and_refuses_new_requests():
    fn = Recorder()
    b = MicroBatcher(fn, max_wait_s=0.3)
    pending = b.submit([5])
    b.close()
    assert pending.result(5) == [10]
    with pytest.raises(PromRewardError, match="closed"):
        b.submit([1])


@pytest.mark.parametrize(
    "options, words",
    [
        ({"max_wait_s": -1}, "max_wait_s"),
        ({"max_batch_size": 0}, "max_batch_size"),
        ({"group_size": 0}, "group_size"),
        ({"group_wait_s": -0.5}, "group_wait_s"),
        ({"max_concurrent": 0}, "max_concurrent"),
    ],
)
def test_bad_options(options, words):
    with pytest.raises(ConfigError, match=words):
        MicroBatcher(lambda items: items, **options)
