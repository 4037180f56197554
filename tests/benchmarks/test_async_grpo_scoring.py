"""benchmarks/async_grpo_scoring.py's harness: TRL's own ``_score_loop`` over waiting groups, scripted judge."""

from __future__ import annotations

import asyncio
import math

import pytest

from benchmarks.async_grpo_scoring import CallLog, logged_reward, rollout_groups, score_loop, tokenizer
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.judge import PrometheusJudge


def respond(request: GenerationRequest, index: int) -> str:
    """Answer 0 of each group gets 5, the others 2."""
    return "Good. [RESULT] 5" if "Answer 0 " in request.user else "Plain. [RESULT] 2"


class ServedScripted(ScriptedBackend):
    """The scripted judge answering after an awaited wait, as a judge server does (the loop runs other calls)."""

    async def agenerate(self, requests, **options):
        await asyncio.sleep(0.05)
        return await super().agenerate(requests, **options)


@pytest.mark.integration
@pytest.mark.parametrize(("in_flight", "sizes", "peak"), [(1, [4] * 6, 4), (3, [4] * 6, 12), (8, [4] * 6, 24)])
def test_score_loop_keeps_groups_in_flight_with_per_group_advantages(smollm2_dir, in_flight, sizes, peak):
    tok = tokenizer(str(smollm2_dir))
    log = CallLog()
    groups = rollout_groups(tok, 6, 4)
    reward = logged_reward(PrometheusJudge(backend=ServedScripted(respond=respond)), log)
    samples = score_loop(tok, reward, groups, in_flight)
    assert sorted(log.sizes()) == sizes, log.calls
    assert log.peak() == peak, log.calls
    assert sorted(s.group_id for s in samples) == sorted(g for g in range(6) for _ in range(4))
    for s in samples:
        best = s.completion[0]["content"].startswith("Answer 0 ")
        assert s.metrics["rewards/prometheus"] == (5.0 if best else 2.0)
        assert (s.advantage > 0) == best and not math.isnan(s.advantage)  # TRL's advantage, within its group
