"""Issue 31's reading rule: on the call stack from ``PrometheusReward.__call__`` to the backend, no module of
``prom_reward`` is entered again after it was left (a path you can read top to bottom)."""

from __future__ import annotations

import threading
import traceback
from pathlib import Path

import pytest

import prom_reward
from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.rewards.reward import PrometheusReward

PACKAGE = Path(prom_reward.__file__).parent


class StackRecordingBackend(ScriptedBackend):
    """A scripted judge that records, at each generation call, the prom_reward modules on the stack (outermost
    first), of this thread and of the thread that called the reward (the sync form waits on the loop thread)."""

    def __init__(self, caller: threading.Thread, **kwargs) -> None:
        super().__init__(**kwargs)
        self.caller = caller
        self.stacks: list[list[str]] = []

    async def agenerate(self, requests, **options):
        frames = traceback.extract_stack()
        if threading.current_thread() is not self.caller:
            import sys

            caller_frame = sys._current_frames()[self.caller.ident]
            frames = traceback.extract_stack(caller_frame) + frames
        self.stacks.append(_modules(frames))
        return await super().agenerate(requests, **options)


def _modules(frames: traceback.StackSummary) -> list[str]:
    """The prom_reward modules of the frames, consecutive repeats folded into one."""
    out: list[str] = []
    for f in frames:
        path = Path(f.filename)
        if PACKAGE in path.parents:
            name = str(path.relative_to(PACKAGE.parent).with_suffix("")).replace("/", ".")
            if not out or out[-1] != name:
                out.append(name)
    return out


def _grade(req: GenerationRequest, i: int) -> str:
    return "Fine. [RESULT] 4"


def _pair(req: GenerationRequest, i: int) -> str:
    return "A is better. [RESULT] A"


@pytest.mark.parametrize(
    ("mode", "respond", "kwargs"),
    [
        ("absolute", _grade, {}),
        ("pairwise_group", _pair, {}),
        ("absolute", _grade, {"checklist": [["Says hi", "Is polite"], None]}),
    ],
    ids=["absolute", "pairwise_group", "checklist"],
)
def test_no_module_is_entered_again_on_the_way_to_the_backend(mode, respond, kwargs):
    backend = StackRecordingBackend(threading.current_thread(), respond=respond)
    reward = PrometheusReward(PrometheusJudge(backend=backend), mode=mode, checklist_column="checklist")
    rewards = reward(["Say hi.", "Say hi."], ["hi", "hello there"], **kwargs)
    assert all(r is not None for r in rewards)
    assert backend.stacks, "the judge was never called"
    for stack in backend.stacks:
        # the path this test guards: the reward, the outage policy, the mode, the judge, the sampler
        for module in ("rewards.reward", "rewards.outage", "core.judge", "core.sampler"):
            assert f"prom_reward.{module}" in stack, stack
        again = [m for i, m in enumerate(stack) if m in stack[:i]]
        assert not again, f"entered again after it was left: {again} in {stack}"


def test_the_check_sees_a_module_entered_again():
    assert _modules(
        traceback.StackSummary.from_list(
            [(str(PACKAGE / "rewards" / "reward.py"), 1, "a", ""), (str(PACKAGE / "rewards" / "outage.py"), 1, "b", "")]
            + [(str(PACKAGE / "rewards" / "reward.py"), 2, "c", "")]
        )
    ) == ["prom_reward.rewards.reward", "prom_reward.rewards.outage", "prom_reward.rewards.reward"]
