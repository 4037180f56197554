"""``AsyncPrometheusReward`` awaits its judge on the caller's event loop: an HTTP judge's requests go out
from the loop's own thread (no worker thread), over that loop's one long-lived session; the configuration
canary before the first batch goes through the sync path (the library's loop); sync and async agree."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.bridge import library_loop
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward
from tests.fakes import FakeServer

REPLY = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fine. [RESULT] 4"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
}


class Recording(OpenAIServer):
    """The ``openai`` backend, noting the thread and loop each ``agenerate`` runs on."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[int, asyncio.AbstractEventLoop]] = []

    async def agenerate(self, requests, *, on_result=None):
        self.seen.append((threading.get_ident(), asyncio.get_running_loop()))
        return await super().agenerate(requests, on_result=on_result)


@pytest.fixture
def judge_server() -> Iterator[FakeServer]:
    srv = FakeServer(
        {
            "/v1/models": lambda k, b: (200, {"data": [{"id": "fake", "max_model_len": 4096}]}),
            "/v1/chat/completions": lambda k, b: (200, REPLY),
        },
        keep_alive=True,
    )
    yield srv
    srv.stop()


def reward_over(url: str, cls: type[PrometheusReward]) -> tuple[PrometheusReward, Recording]:
    backend = Recording(url, model="fake", system_role=False)
    return cls(PrometheusJudge(backend=backend)), backend


def test_the_async_reward_judges_on_the_callers_loop_thread(judge_server):
    reward, backend = reward_over(judge_server.url, AsyncPrometheusReward)

    async def train_step() -> tuple[list[list[float | None]], int, asyncio.AbstractEventLoop]:
        out = [await reward(["Say hi."], ["hi"]), await reward(["Say hi.", "Say bye."], ["hi", "bye"])]
        await backend.aclose()
        return out, threading.get_ident(), asyncio.get_running_loop()

    rewards, ident, loop = asyncio.run(train_step())
    assert rewards == [[4.0], [4.0, 4.0]]
    assert backend.seen == [(ident, loop)] * 3  # the canary, then each batch: on the trainer's loop, in its thread
    ports = [port for (path, _), port in zip(judge_server.calls, judge_server.peers, strict=True) if "chat" in path]
    assert len(ports) == 4 and ports[1] in ports[2:]  # the loop's one session: the second batch reuses a connection


def test_sync_and_async_rewards_agree_over_http(judge_server):
    sync, sync_backend = reward_over(judge_server.url, PrometheusReward)
    asy, _ = reward_over(judge_server.url, AsyncPrometheusReward)
    try:
        assert sync(["Say hi."], ["hi"]) == asyncio.run(asy(["Say hi."], ["hi"])) == [4.0]
        assert {loop for _, loop in sync_backend.seen} == {library_loop()}
    finally:
        sync_backend.close()
