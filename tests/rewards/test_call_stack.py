"""Issue 31's reading rule: on the call stack from ``PrometheusReward.__call__`` to the backend, no module of
``prom_reward`` is entered again after it was left (a path you can read top to bottom).

``AsyncPrometheusReward.__call__`` runs the whole path on the caller's loop, one stack. The sync
``PrometheusReward.__call__`` hands the call to the library's loop thread through ``compute``, the one sync
wrapper (``backends/bridge.py``): the caller's thread holds just the reward and the bridge, and the loop
thread's stack, from ``acompute`` to the backend, enters each module once. The judge's own list forms
(``grade``, ``compare``, ``compare_by_grades``, sync and awaited) are held to the same rule. On the stand-in
HTTP judge, with the context check (``/tokenize``) and the judgment store on, a grade through each reward and a
job also crosses no thread but the bridge's: every backend call runs on the caller's thread (async) or the
library's loop thread (sync)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import traceback
from pathlib import Path

import pytest

import prom_reward
from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward
from tests.fakes import StandInJudge

PACKAGE = Path(prom_reward.__file__).parent
ON_THE_PATH = ("rewards.reward", "rewards.outage", "core.judge", "core.sampler")


class StackRecordingBackend(ScriptedBackend):
    """A scripted judge that records, at each generation call, the prom_reward modules on its own thread's stack
    and, when that is another thread, on the stack of the thread that called the reward (outermost first)."""

    def __init__(self, caller: threading.Thread, **kwargs) -> None:
        super().__init__(**kwargs)
        self.caller = caller
        self.stacks: list[list[str]] = []
        self.caller_stacks: list[list[str]] = []

    async def agenerate(self, requests, **options):
        self.stacks.append(_modules(traceback.extract_stack()))
        if threading.current_thread() is not self.caller:
            self.caller_stacks.append(_modules(traceback.extract_stack(sys._current_frames()[self.caller.ident])))
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


def _entered_again(stack: list[str]) -> list[str]:
    return [m for i, m in enumerate(stack) if m in stack[:i]]


def _grade(req: GenerationRequest, i: int) -> str:
    return "Fine. [RESULT] 4"


def _pair(req: GenerationRequest, i: int) -> str:
    return "A is better. [RESULT] A"


CASES = pytest.mark.parametrize(
    ("mode", "respond", "kwargs"),
    [
        ("absolute", _grade, {}),
        ("pairwise_group", _pair, {}),
        ("absolute", _grade, {"checklist": [["Says hi", "Is polite"], None]}),
    ],
    ids=["absolute", "pairwise_group", "checklist"],
)


def _check(stacks: list[list[str]]) -> None:
    assert stacks, "the judge was never called"
    for stack in stacks:
        for module in ON_THE_PATH:  # the path this test guards: the reward, the outage policy, the judge, the sampler
            assert f"prom_reward.{module}" in stack, stack
        assert stack[0] == "prom_reward.rewards.reward", stack
        assert not _entered_again(stack), f"entered again after it was left: {_entered_again(stack)} in {stack}"


@CASES
def test_async_reward_enters_each_module_once(mode, respond, kwargs):
    backend = StackRecordingBackend(threading.current_thread(), respond=respond)
    reward = AsyncPrometheusReward(PrometheusJudge(backend=backend), mode=mode, checklist_column="checklist")
    rewards = asyncio.run(reward(["Say hi.", "Say hi."], ["hi", "hello there"], **kwargs))
    assert all(r is not None for r in rewards)
    assert backend.caller_stacks == []  # one thread, one stack
    _check(backend.stacks)


@CASES
def test_sync_reward_wraps_once_then_enters_each_module_once(mode, respond, kwargs):
    backend = StackRecordingBackend(threading.current_thread(), respond=respond)
    reward = PrometheusReward(PrometheusJudge(backend=backend), mode=mode, checklist_column="checklist")
    rewards = reward(["Say hi.", "Say hi."], ["hi", "hello there"], **kwargs)
    assert all(r is not None for r in rewards)
    assert backend.caller_stacks and all(
        s == ["prom_reward.rewards.reward", "prom_reward.backends.bridge"] for s in backend.caller_stacks
    ), backend.caller_stacks
    assert all(s[0] == "prom_reward.backends.bridge" for s in backend.stacks)  # the loop thread's entry
    _check([s[1:] for s in backend.stacks])


def test_the_check_sees_a_module_entered_again():
    reward, outage = str(PACKAGE / "rewards" / "reward.py"), str(PACKAGE / "rewards" / "outage.py")
    stack = _modules(
        traceback.StackSummary.from_list([(reward, 1, "a", ""), (outage, 1, "b", ""), (reward, 2, "c", "")])
    )
    assert stack == ["prom_reward.rewards.reward", "prom_reward.rewards.outage", "prom_reward.rewards.reward"]
    assert _entered_again(stack) == ["prom_reward.rewards.reward"]


class EveryThreadRecordingBackend(ScriptedBackend):
    """A scripted judge that records, at each generation call, the prom_reward modules on every thread's stack."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stacks: list[list[str]] = []

    async def agenerate(self, requests, **options):
        for frame in sys._current_frames().values():
            stack = _modules(traceback.extract_stack(frame))
            if stack:
                self.stacks.append(stack)
        return await super().agenerate(requests, **options)


@pytest.mark.parametrize("reward_cls", [PrometheusReward, AsyncPrometheusReward])
def test_the_first_calls_canary_enters_each_module_once_on_every_thread(reward_cls):
    """The canary of a first call (a judge behind a server owes one) is awaited on the reward's own loop, through
    its outage loop and mode: no worker thread, and no thread's stack enters a module again."""
    backend = EveryThreadRecordingBackend(respond=_grade)
    reward = reward_cls(PrometheusJudge(backend=backend))
    reward.canary.due = True  # as for a judge behind a server (``rewards.startup.over_http``)
    call = reward(["Say hi."], ["hi"])
    rewards = asyncio.run(call) if reward_cls is AsyncPrometheusReward else call
    assert rewards == [4.0] and not reward.canary.due and len(backend.calls) == 2  # the canary, then the batch
    canary = [s for s in backend.stacks if "prom_reward.rewards.startup" in s]
    assert len(canary) == 1, backend.stacks  # the canary's judgment, on the thread of the reward's loop only
    at = canary[0].index("prom_reward.rewards.reward")
    path = ["prom_reward.rewards.reward", "prom_reward.rewards.startup", "prom_reward.rewards.outage"]
    assert canary[0][at : at + 3] == path
    for stack in backend.stacks:
        assert not _entered_again(stack), f"entered again after it was left: {_entered_again(stack)} in {stack}"


def _rank(req: GenerationRequest, i: int) -> str:
    return "Better. [RESULT] 5" if "seven" in req.user else "Worse. [RESULT] 2"


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("grade", (["Say hi."], ["hi"], "helpfulness")),
        ("compare", (["Say hi."], ["hi"], ["hello"], "helpfulness")),
        ("compare_by_grades", (["Name a prime."], ["seven"], ["nine"], "helpfulness")),
    ],
)
def test_the_judges_list_forms_enter_each_module_once(method, args):
    """The judge's own path, below the reward: a list form builds the items, the item method judges them (tie rounds
    included for ``compare_by_grades``); no module on any thread's stack is entered again after it was left."""
    backend = EveryThreadRecordingBackend(respond=_pair if method == "compare" else _rank)
    judge = PrometheusJudge(backend=backend)
    sync_out = getattr(judge, method)(*args)
    async_out = asyncio.run(getattr(judge, f"a{method}")(*args))
    assert [r.ok for r in sync_out + async_out] == [True, True]
    assert method != "compare_by_grades" or [v.winner for v in sync_out + async_out] == ["A", "A"]
    assert any("prom_reward.core.protocol" in s and "prom_reward.core.judge" in s for s in backend.stacks)
    for stack in backend.stacks:
        assert not _entered_again(stack), f"entered again after it was left: {_entered_again(stack)} in {stack}"


def _fair(req: GenerationRequest, i: int) -> str:
    return "[RESULT] " + ("A" if req.user.index("hello there") < req.user.index("###Response B") else "B")


@pytest.mark.parametrize("checklist", [None, [["Says hi"], ["Says hi"]]], ids=["verdict", "checklist"])
def test_online_dpo_pairs_reach_the_backend_through_the_rewards_own_frames(checklist):
    """Online DPO's pairs go through ``PrometheusReward.judge_batch``, the reward's one sync wrapper: the caller's
    thread holds the online-DPO reward and the bridge, and the loop thread's stack is a ``PrometheusReward``'s
    (mode ``pairwise_reference``, or ``absolute`` for a checklist row), each module entered once."""
    from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward

    respond = _fair if checklist is None else _grade
    columns = {} if checklist is None else {"checklist": checklist}
    backend = StackRecordingBackend(threading.current_thread(), respond=respond)
    reward = OnlineDPOJudgeReward(PrometheusJudge(backend=backend), checklist_column="checklist")
    assert sorted(reward(["Say hi.", "Say hi."], ["hi", "hello there"], **columns)) == [0.0, 1.0]
    assert reward.stats.decided_by_judge + reward.stats.ties == 1 and reward.stats.unjudged_pairs == 0
    assert backend.caller_stacks and all(
        s == ["prom_reward.rewards.online_dpo", "prom_reward.backends.bridge"] for s in backend.caller_stacks
    ), backend.caller_stacks
    assert all(s[0] == "prom_reward.backends.bridge" for s in backend.stacks)
    _check([s[1:] for s in backend.stacks])

    mode = "pairwise_reference" if checklist is None else "absolute"
    plain = StackRecordingBackend(threading.current_thread(), respond=respond)
    same = PrometheusReward(PrometheusJudge(backend=plain), mode=mode, checklist_column="checklist")
    same(["Say hi."], ["hi"], baseline=["hello there"], **({} if checklist is None else {"checklist": checklist[:1]}))
    assert {tuple(s) for s in backend.stacks} == {tuple(s) for s in plain.stacks}  # the same frames to the backend


class RecordingServer(OpenAIServer):
    """The ``openai`` backend, recording at each protocol call (``agenerate``, ``acount_tokens``,
    ``acontext_length``) the thread it runs on, the prom_reward modules on that thread's stack, and the
    threads holding prom_reward frames then (their modules)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[str, threading.Thread, list[str], dict[threading.Thread, list[str]]]] = []

    def _record(self, method: str) -> None:
        threads = {t.ident: t for t in threading.enumerate()}
        frames = sys._current_frames().items()  # a thread not started by threading (execnet's) is named by its id
        held = {threads.get(i, f"thread {i}"): _modules(traceback.extract_stack(f)) for i, f in frames}
        here = threading.current_thread()
        self.seen.append((method, here, held[here], {t: s for t, s in held.items() if s and t is not here}))

    async def agenerate(self, requests, **options):
        self._record("agenerate")
        return await super().agenerate(requests, **options)

    async def acount_tokens(self, requests, deadline=None):
        self._record("acount_tokens")
        return await super().acount_tokens(requests, deadline)

    async def acontext_length(self, deadline=None):
        self._record("acontext_length")
        return await super().acontext_length(deadline)


@pytest.fixture
def stand_in():
    judge = StandInJudge(max_model_len=2048, model="stand-in-judge").start()
    try:
        yield judge
    finally:
        judge.stop()


def _served_judge(stand_in: StandInJudge, tmp_path: Path) -> tuple[PrometheusJudge, RecordingServer]:
    """A judge on the stand-in server with the context check on (its max_model_len is known, prompts are long
    enough to be counted with /tokenize) and the judgment store on."""
    backend = RecordingServer(stand_in.url, model="stand-in-judge", system_role=True)
    judge = PrometheusJudge(backend=backend, store=tmp_path / "judgments.sqlite", sampling={"max_tokens": 256})
    return judge, backend


def _check_served(backend: RecordingServer, caller: threading.Thread, loop_thread: threading.Thread | None) -> None:
    """Every protocol call ran on one thread (the caller's, or the bridge's loop thread for a sync caller, whose
    own stack then ends in the bridge): no thread is crossed elsewhere, no other thread holds prom_reward frames,
    and no module on the backend's stack is entered again."""
    methods = {m for m, *_ in backend.seen}
    assert {"agenerate", "acount_tokens", "acontext_length"} <= methods, methods
    for method, thread, stack, others in backend.seen:
        if loop_thread is None:
            assert thread is caller and others == {}, (method, thread, others)
        else:
            assert thread is loop_thread and stack[0] == "prom_reward.backends.bridge", (method, stack)
            assert set(others) == {caller} and others[caller][-1] == "prom_reward.backends.bridge", others
            assert not _entered_again(others[caller]), others[caller]
            stack = stack[1:]
        assert not _entered_again(stack), f"{method}: entered again after it was left: {_entered_again(stack)}"


LONG = "a response long enough that the context check counts its prompt with /tokenize " * 8


def test_a_served_grade_through_the_async_reward_stays_on_the_callers_thread(stand_in, tmp_path):
    judge, backend = _served_judge(stand_in, tmp_path)
    reward = AsyncPrometheusReward(judge)
    assert asyncio.run(reward(["Say hi."], [LONG])) == [3.0]
    _check_served(backend, threading.current_thread(), None)
    judge.close()


def test_a_served_grade_through_the_sync_reward_crosses_only_the_bridge(stand_in, tmp_path):
    from prom_reward.backends import bridge

    judge, backend = _served_judge(stand_in, tmp_path)
    reward = PrometheusReward(judge)
    assert reward(["Say hi."], [LONG]) == [3.0]
    assert bridge._thread is not None
    _check_served(backend, threading.current_thread(), bridge._thread)
    judge.close()


def test_a_served_grade_job_crosses_only_the_bridge(stand_in, tmp_path):
    from prom_reward.backends import bridge
    from prom_reward.jobs.run import grade_file

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"instruction": "Say hi.", "response": LONG}) + "\n")
    judge, backend = _served_judge(stand_in, tmp_path)
    summary = grade_file(src, tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    assert summary.rows == 1 and summary.failed == 0
    assert bridge._thread is not None
    _check_served(backend, threading.current_thread(), bridge._thread)
    judge.close()
