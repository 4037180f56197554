"""The fault matrix (``tests.reward_faults``) of OpenRLHF 0.11.2's two reward paths, driven by its own code
against a stand-in judge server:

- the HTTP reward server: ``SingleTurnAgentExecutor.execute`` (its ``_fetch_rewards_via_http``: five tries a
  second apart, 180 s timeout) for concurrent samples, then ``SamplesGenerator._process_response_into_experience``
  and ``make_experience_batch``;
- the in-process file: the same executor on ``reward_func_path()`` (``_fetch_rewards_via_func``, settings from
  the environment).

No case may crash the trainer or fail a healthy sample; every failure is flagged with its reason; a judge down
past the budget gives the failure reward with the cause (``outage_on_exhausted=fail``) or, with
``outage_on_exhausted=raise`` (the default), leaves OpenRLHF without rewards, which stops its experience maker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time

import httpx
import pytest
from openrlhf.utils import agent

from prom_reward.integrations import openrlhf_func
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.openrlhf_server import create_app
from prom_reward.integrations.settings import ENV_PREFIX, RewardSettings, setting_names
from tests.integrations.test_openrlhf_http import running
from tests.integrations.test_openrlhf_server import PROMPT, execute, tokenizer  # noqa: F401 (fixture)
from tests.reward_faults import (
    CASES,
    FAILED,
    MISCONFIGURED,
    OPENRLHF_RETRY_WINDOW_S,
    Case,
    check,
    settings_file,
)

OUTAGE_S = OPENRLHF_RETRY_WINDOW_S + 1.5
"""The ``outage`` case here: the judge is down longer than OpenRLHF's own retry window."""


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    openrlhf_func.reset()
    prom_verl.reset()
    yield
    openrlhf_func.reset()
    prom_verl.reset()


def start_judge(stand_in, name: str):
    case = CASES[name]
    return stand_in(case, down_for=OUTAGE_S) if name == "outage" else stand_in(case)


def run_openrlhf(executor, tok, case: Case):
    """Every sample of ``case`` through ``executor.execute`` at once, then OpenRLHF's experience batching:
    (rewards, judge_failed flags, the executor's outputs); rewards and flags are None when no sample got a reward."""
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    async def all_samples():
        return await asyncio.gather(
            *(
                execute(executor, tok, " " + r, label=label)
                for r, label in zip(case.responses, case.labels, strict=True)
            )
        )

    outs = asyncio.run(all_samples())
    gen = SamplesGenerator.__new__(SamplesGenerator)
    longest = max(len(o["observation_tokens"]) for o in outs)
    batch = make_experience_batch([gen._process_response_into_experience(o, max_len=longest) for o in outs])
    if batch.rewards is None:
        return None, None, outs
    return batch.rewards.flatten().tolist(), [float(t) for t in batch.info["judge_failed"]], outs


@contextlib.contextmanager
def openrlhf_log(caplog):
    """OpenRLHF's executor log (its logger does not propagate) into ``caplog`` too."""
    log = logging.getLogger("openrlhf.utils.agent")
    log.addHandler(caplog.handler)
    try:
        yield
    finally:
        log.removeHandler(caplog.handler)


def check_stopped(rewards, outs) -> None:
    """OpenRLHF got no reward for any sample: its ``make_experience`` then raises ("reward_model_group is required
    when rewards are not precomputed"): training stops."""
    assert rewards is None and all(o["reward"] is None for o in outs), outs


@pytest.mark.parametrize("name", sorted(CASES))
def test_openrlhf_reward_server(name, stand_in, tokenizer, tmp_path, caplog):  # noqa: F811
    case = CASES[name]
    judge = start_judge(stand_in, name)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, case))}, env={})
    start = time.monotonic()
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        with openrlhf_log(caplog):
            rewards, failed, outs = run_openrlhf(ex, tokenizer, case)
        stats = httpx.get(url + "/stats", timeout=10).json()
        health = httpx.get(url + "/health", timeout=10).json()
    took = time.monotonic() - start
    if case.misconfigured:  # 500 with the error (never the failure reward), /health failing: OpenRLHF gives up
        check_stopped(rewards, outs)
        assert stats["judge_failures"] == 0 and "Request error for 5 times" in caplog.text
        assert health["status"] == "failing" and re.search(MISCONFIGURED, health["cause"]), health
        return
    if case.stops:  # outage_on_exhausted=raise: 503 with the cause, OpenRLHF gives up after its five tries
        check_stopped(rewards, outs)
        assert stats["judge_unavailable"] >= len(case.responses) and "Request error for 5 times" in caplog.text
        assert health["status"] == "degraded" and "503" in health["cause"]
        return
    check(case, rewards, failed)
    assert "Request error" not in caplog.text  # never a 5xx (nor any other error) to OpenRLHF's client
    assert stats["rejected"] == stats["judge_unavailable"] == 0
    assert len({frozenset(o["extra_logs"]) for o in outs}) == 1  # one set of log keys: batching never breaks
    assert stats["judge_failures"] == sum(r == FAILED for r in case.expected)
    if name == "outage":
        assert took > OUTAGE_S and health["status"] == "ok" and health["failures"] > 0
    if name == "dead":
        assert health["status"] == "degraded" and "503" in health["cause"]
    if name == "over_context":
        assert max(o["extra_logs"]["truncated_responses"][0] for o in outs) >= 1
        assert any(r.startswith("long xxx") and len(r) < 20_000 for r in judge.graded)  # truncated, then judged
    if name == "over_context_fail":
        assert not any(r.startswith("long") for r in judge.graded)  # never sent to the judge


@pytest.mark.parametrize("name", sorted(CASES))
def test_openrlhf_reward_func(name, stand_in, tokenizer, tmp_path, monkeypatch, caplog):  # noqa: F811
    case = CASES[name]
    judge = start_judge(stand_in, name)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, case)))
    ex = agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path())
    with openrlhf_log(caplog), caplog.at_level(logging.INFO):
        rewards, failed, outs = run_openrlhf(ex, tokenizer, case)
    if case.misconfigured:  # the canary of the reward's first batch raised: logged at ERROR with the fix
        check_stopped(rewards, outs)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("stops the run" in m and re.search(MISCONFIGURED, m) for m in errors), errors
        return
    if case.stops:  # reward_func raised: OpenRLHF logs it at INFO only, prom-reward at ERROR with the cause
        check_stopped(rewards, outs)
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("stops the run" in m and "failing for" in m and "503" in m for m in errors), errors
        return
    check(case, rewards, failed)
    assert len({frozenset(o["extra_logs"]) for o in outs}) == 1
    if name == "dead":
        reasons = [r.getMessage() for r in caplog.records if "failed and got the failure reward" in r.getMessage()]
        assert reasons and all("failing for" in m for m in reasons)


def test_a_judge_serving_another_model_stops_the_first_reward_func_call(
    stand_in,
    tokenizer,  # noqa: F811
    tmp_path,
    monkeypatch,
    caplog,
):
    """Validation at start for the in-process file: a judge that answers but serves another model is a configuration
    error on the first call, logged at ERROR (OpenRLHF logs it at INFO and the sample has no reward: the run
    stops); a judge that is down only warns (the ``late`` case)."""
    judge = stand_in(Case())
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, Case(), model="other")))
    ex = agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path())
    with openrlhf_log(caplog), caplog.at_level(logging.INFO):
        rewards, _, outs = run_openrlhf(ex, tokenizer, Case(responses=("good",), labels=(None,)))
    check_stopped(rewards, outs)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("not configured" in m and "does not serve the model 'other'" in m for m in errors), errors
    assert judge.chats == 0


def test_openrlhf_client_gets_reasons_for_a_poisoned_response_and_a_dead_judge(stand_in, tmp_path):
    """``_fetch_rewards_via_http`` (OpenRLHF's own client) with a lone surrogate in one response of a batch."""
    case = CASES["poisoned"]
    judge = stand_in(case)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, case))}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        queries = [PROMPT + " good", PROMPT + " bad \ud800 bytes", PROMPT + " fair"]

        async def concurrent():
            return await asyncio.gather(*(ex._fetch_rewards_via_http([q], [PROMPT], [None]) for q in queries))

        replies = [r[0] for r in asyncio.run(concurrent())]
    assert [r["rewards"][0] for r in replies] == [5.0, FAILED, 2.0]
    assert "lone surrogate" in replies[1]["failure_reasons"][0] and replies[0]["failure_reasons"] == [None]
    judge.stop()
    dead = stand_in(CASES["dead"])
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, dead.url, CASES["dead"]))}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        [reply] = asyncio.run(ex._fetch_rewards_via_http([PROMPT + " good"], [PROMPT], [None]))
    assert reply["rewards"] == [FAILED] and "failing for" in reply["failure_reasons"][0]
    assert "503" in reply["failure_reasons"][0]


@contextlib.contextmanager
def openrlhf_executor(path: str, settings_path, monkeypatch):
    """OpenRLHF's executor on the reward server (``path="server"``) or the in-process file (``"func"``), both
    reading ``settings_path``; and a function returning the batcher's counters."""
    if path == "func":
        monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_path))
        yield (
            agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path()),
            lambda: openrlhf_func.batched_reward().stats.as_dict(),
        )
        return
    settings = RewardSettings.load({"config_file": str(settings_path)}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        yield (
            agent.SingleTurnAgentExecutor(url + "/get_reward"),
            lambda: httpx.get(url + "/stats", timeout=10).json()["batcher"],
        )


REQUEST_TIMEOUT_S = 4.0
"""The hung-call tests' request deadline: with ``outage_call_timeout_s`` unset, one judge call may take half of it."""


def staggered(call, delays: tuple[float, ...]) -> list[tuple[float, list[float]]]:
    """``await call()`` after each delay, all at once: (seconds each took, its rewards)."""

    async def one(delay: float) -> tuple[float, list[float]]:
        await asyncio.sleep(delay)
        start = time.monotonic()
        rewards = await call()
        return time.monotonic() - start, rewards

    async def every() -> list[tuple[float, list[float]]]:
        return await asyncio.gather(*(one(d) for d in delays))

    return asyncio.run(every())


@pytest.mark.parametrize("path", ["server", "func"])
def test_a_hung_judge_call_does_not_block_later_requests(path, stand_in, tmp_path, monkeypatch):
    """The first judge call hangs; samples that arrive after it are answered at once, and the hung one after
    its per-call timeout (half the request deadline: the setting is unset) and a retry, not after the
    backend's 600 s. Through OpenRLHF's own client (``_fetch_rewards_via_http`` / ``_fetch_rewards_via_func``)."""
    case = Case(judge={"hang_first": 1}, settings={"batch_window_ms": 0, "request_timeout": REQUEST_TIMEOUT_S})
    judge = stand_in(case)
    path_file = settings_file(tmp_path, judge.url, case)
    query = ([PROMPT + " good"], [PROMPT], [None])
    with openrlhf_executor(path, path_file, monkeypatch) as (ex, stats):
        fetch = ex._fetch_rewards_via_http if path == "server" else ex._fetch_rewards_via_func

        async def call() -> list[float]:
            [reply] = await fetch(*query)
            return reply["rewards"]

        (t_hung, first), (t_a, a), (t_b, b) = staggered(call, (0.0, 0.5, 0.7))
        assert first == a == b == [5.0]
        assert t_a < 2.0 and t_b < 2.0, (t_a, t_b)
        assert REQUEST_TIMEOUT_S / 2 - 0.5 <= t_hung < REQUEST_TIMEOUT_S, t_hung
        assert stats()["max_in_flight"] >= 2
    assert judge.hung == 1 and judge.chats >= 4
