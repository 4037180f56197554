"""``BatchedReward`` on its own: per-sample isolation inside a batch, groups, the batch cap inside one request,
deadlines handed to the judge, concurrent batches only for judges that take them, stable log keys (issue 26)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import BackendError, JudgeUnavailableError
from prom_reward.integrations.batched_reward import BatchedReward
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample
from tests.fakes import BlockingScripted
from tests.judges import judge_by_rank, response_of


def sample(response: str, prompt: str = "Say something.", **fields) -> RewardSample:
    return RewardSample(prompt=prompt, response=response, **fields)


def test_a_poisoned_sample_fails_alone_with_its_reason_and_the_same_keys():
    seen = []
    br = BatchedReward(PrometheusReward(judge_by_rank({"good": 5, "fair": 2}, seen=seen)), max_wait_s=0.2)
    out = br.score([sample("good"), sample("fair \ud800"), sample("fair"), sample("good", rubric="no_such_rubric")])
    br.close()
    assert [r.reward for r in out] == [5.0, None, 2.0, None]
    assert "lone surrogate" in out[1].reason and "no_such_rubric" in out[3].reason
    assert [r.failed for r in out] == [False, True, False, True]
    assert len({tuple(r.extra_logs()) for r in out}) == 1 and tuple(out[0].extra_logs()) == br.extra_log_keys
    assert out[0].metrics["failed_samples"] == 2.0 and out[0].metrics["abstain_rate"] == 0.5
    assert sorted(response_of(r) for r in seen) == ["fair", "good"]  # the bad ones never reached the judge


def test_5000_samples_in_one_request_go_to_the_judge_in_capped_batches():
    sizes = []

    class Counting(ScriptedBackend):
        def generate(self, requests, **kw):
            sizes.append(len(requests))
            return super().generate(requests, **kw)

    backend = Counting(respond=lambda req, i: "[RESULT] 3")
    br = BatchedReward(PrometheusReward(PrometheusJudge(backend=backend)), max_wait_s=0.0, max_batch_size=256)
    out = br.score([sample(f"answer {k}") for k in range(5000)])
    br.close()
    assert len(out) == 5000 and all(r.reward == 3.0 for r in out)
    assert max(sizes) <= 256 and sum(sizes) == 5000
    assert br.stats.split_requests == 1 and br.stats.max_batch <= 256


def test_pairwise_group_waits_for_the_group_and_fails_a_lonely_sample():
    reward = PrometheusReward(judge_by_rank({"good": 3, "bad": 1}), mode="pairwise_group")
    br = BatchedReward(reward, max_wait_s=0.0, group_size=2, group_wait_s=0.3)

    async def both():
        return await asyncio.gather(
            br.ascore([sample("good", "p")]), br.ascore([sample("bad", "p")]), br.ascore([sample("good", "alone")])
        )

    (good,), (bad,), (alone,) = asyncio.run(both())
    br.close()
    assert (good.reward, bad.reward) == (1.0, 0.0)
    assert alone.failed and "only 1 of the 2 samples" in alone.reason


def test_the_request_deadline_reaches_the_judge_call():
    reward = PrometheusReward(judge_by_rank({"good": 5}))
    seen = []
    original = reward.ajudge_batch

    async def spy(samples, *, deadline=None):
        seen.append(deadline)
        return await original(samples, deadline=deadline)

    reward.ajudge_batch = spy
    br = BatchedReward(reward, max_wait_s=0.0)
    before = time.monotonic()
    br.score([sample("good")], timeout=30.0)
    br.score([sample("good")])
    br.close()
    assert before + 29 < seen[0] < time.monotonic() + 30 and seen[1] is None


class Gated(BlockingScripted):
    """A scripted backend whose first call waits for a gate (another call can pass meanwhile)."""

    def __init__(self, gate: threading.Event, thread_safe: bool) -> None:
        super().__init__(respond=lambda req, i: "[RESULT] 4")
        self.gate, self.count = gate, 0
        self.capabilities = dataclasses.replace(self.capabilities, thread_safe=thread_safe)

    def generate(self, requests, **kw):
        self.count += 1
        if self.count == 1:
            assert self.gate.wait(10)
        return super().generate(requests, **kw)


@pytest.mark.parametrize("thread_safe, concurrent", [(True, 4), (False, 1)])
def test_batches_run_concurrently_only_for_judges_that_take_it(thread_safe, concurrent):
    gate = threading.Event()
    br = BatchedReward(
        PrometheusReward(PrometheusJudge(backend=Gated(gate, thread_safe))), max_wait_s=0.0, max_concurrent=4
    )
    assert br._batcher.max_concurrent == concurrent
    first = threading.Thread(target=br.score, args=([sample("one")],))
    first.start()
    time.sleep(0.2)
    if thread_safe:
        assert br.score([sample("two")])[0].reward == 4.0  # not held by the first call
    gate.set()
    first.join(10)
    br.close()


def test_a_judge_down_past_the_budget_raises_to_the_callers_when_asked():
    def respond(req, i):
        raise BackendError("connection refused")

    outage = OutagePolicy(budget_s=0.2, backoff_s=0.05, on_exhausted="raise")
    br = BatchedReward(
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)), outage=outage), max_wait_s=0.0
    )
    with pytest.raises(JudgeUnavailableError, match="connection refused"):
        br.score([sample("good")])
    outage = OutagePolicy(budget_s=0.2, backoff_s=0.05, on_exhausted="fail")
    br.close()
    br = BatchedReward(
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)), outage=outage), max_wait_s=0.0
    )
    [res] = br.score([sample("good")])
    br.close()
    assert res.failed and "failing for" in res.reason and res.metrics["outage_failures"] == 1.0


@pytest.mark.parametrize(
    "spec, concurrent",
    [
        ({"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}, 4),  # OpenAIServer declares thread_safe
        ({"backend": "scripted", "outputs": ["[RESULT] 4"]}, 1),
        ({"backend": Gated(threading.Event(), True)}, 4),  # a backend object: its own declaration
    ],
)
def test_a_judge_not_built_yet_is_batched_by_its_backend_class_declaration(spec, concurrent):
    reward = PrometheusReward(spec)
    br = BatchedReward(reward, max_wait_s=0.0, max_concurrent=4)
    assert br._batcher.max_concurrent == concurrent and reward._judge is None  # nothing was built to decide
    br.close()
