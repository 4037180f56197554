"""EndpointPool: balancing, ejection after repeated failures, probing back in (pure logic, explicit clock)."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest

from prom_reward.backends._openai_http import EndpointPool

A, B, C = "http://a/v1", "http://b/v1", "http://c/v1"


def test_least_in_flight_wins_and_ties_rotate():
    pool = EndpointPool([A, B, C])
    pool.sent(A)
    pool.sent(A)
    pool.sent(B)
    assert pool.pick(now=0) == C
    pool.answered(A)
    pool.answered(A)
    pool.answered(B)
    picks = Counter(pool.pick(now=0) for _ in range(30))
    assert picks == {A: 10, B: 10, C: 10}


def test_a_url_that_just_failed_gets_no_call_while_another_is_clean():
    pool = EndpointPool([A, B], eject_after=3, probe_interval=5.0)
    pool.failed(A, now=0)  # one strike: still up, but for 5 s the next calls (a retry among them) go to B
    assert pool.is_up(A) and all(pool.pick(now=1) == B for _ in range(5))
    assert Counter(pool.pick(now=5.5) for _ in range(10)) == {A: 5, B: 5}  # then back in rotation
    pool.failed(B, now=6)
    pool.failed(A, now=6)  # both just failed: both serve, least in flight first
    assert Counter(pool.pick(now=7) for _ in range(10)) == {A: 5, B: 5}
    pool.succeeded(B)
    assert {pool.pick(now=7) for _ in range(5)} == {B}
    solo = EndpointPool([A])
    solo.failed(A, now=0)
    assert solo.pick(now=0) == A


@pytest.mark.parametrize("eject_after,failures,up", [(3, 2, True), (3, 3, False), (1, 1, False), (2, 5, False)])
def test_consecutive_failures_take_a_url_out(eject_after, failures, up):
    pool = EndpointPool([A, B], eject_after=eject_after)
    for _ in range(failures):
        pool.failed(A, now=0)
    assert pool.is_up(A) is up
    assert pool.snapshot()[A]["ejections"] == (0 if up else 1)
    if not up:
        assert {pool.pick(now=0) for _ in range(10)} == {B}


def test_a_success_resets_the_strikes():
    pool = EndpointPool([A, B], eject_after=3)
    pool.failed(A, now=0)
    pool.failed(A, now=0)
    pool.succeeded(A)
    pool.failed(A, now=0)
    pool.failed(A, now=0)
    assert pool.is_up(A) and pool.snapshot()[A]["strikes"] == 2 and pool.snapshot()[A]["failures"] == 4


def test_probe_schedule_doubles_while_failing_and_restores_on_success():
    pool = EndpointPool([A, B], eject_after=1, probe_interval=5.0, max_probe_interval=12.0)
    pool.failed(A, now=100.0)
    assert pool.due_probes(now=104.9) == []
    assert pool.due_probes(now=105.0) == [A]
    assert pool.due_probes(now=105.0) == []  # already being probed
    pool.probe_done(A, False, now=105.0)  # next wait 10 s
    assert pool.due_probes(now=114.9) == [] and pool.due_probes(now=115.0) == [A]
    pool.probe_done(A, False, now=115.0)  # 20 s capped at 12 s
    assert pool.due_probes(now=126.9) == [] and pool.due_probes(now=127.0) == [A]
    pool.probe_done(A, True)
    assert pool.is_up(A) and pool.due_probes(now=1e9) == []
    assert Counter(pool.pick(now=200) for _ in range(10)) == {A: 5, B: 5}


def test_abandoned_probe_is_due_again():
    pool = EndpointPool([A], eject_after=1, probe_interval=1.0)
    pool.failed(A, now=0)
    assert pool.due_probes(now=2) == [A]
    pool.probe_abandoned(A)
    assert pool.due_probes(now=2) == [A]


def test_all_out_still_picks_the_one_due_soonest():
    pool = EndpointPool([A, B], eject_after=1, probe_interval=10.0)
    pool.failed(A, now=0)
    pool.failed(B, now=5)
    assert pool.pick(now=6) == A
    pool.failed(A, now=6)  # used while out and failed again: due later than B now
    assert pool.pick(now=7) == B


def test_pickles_as_a_fresh_pool():
    pool = EndpointPool([A, B], eject_after=1, probe_interval=2.0)
    pool.failed(A, now=0)
    copy = pickle.loads(pickle.dumps(pool))
    assert copy.urls == [A, B] and copy.eject_after == 1 and copy.probe_interval == 2.0
    assert copy.is_up(A) and copy.snapshot()[A]["failures"] == 0
