"""The one sync->async bridge (``backends/bridge.py``) and the long-lived HTTP session it gives the sync
path: one library loop thread for every sync call, one session (one kept-alive connection) per loop."""

from __future__ import annotations

import asyncio
import copy
import gc
import pickle
import threading
import time

import aiohttp
import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.bridge import library_loop, on_library_loop, run_sync
from prom_reward.backends.openai_server import OpenAIServer
from tests.fakes import FakeServer, chat_reply


async def where() -> tuple[int, asyncio.AbstractEventLoop]:
    return threading.get_ident(), asyncio.get_running_loop()


async def boom() -> None:
    raise ValueError("from the coroutine")


def test_every_sync_call_runs_on_one_long_lived_loop_thread():
    seen = [run_sync(where) for _ in range(3)]
    assert len(set(seen)) == 1
    ident, loop = seen[0]
    assert ident != threading.get_ident() and loop is library_loop() and loop.is_running()
    assert not on_library_loop()


def test_exceptions_come_back_to_the_caller():
    with pytest.raises(ValueError, match="from the coroutine"):
        run_sync(boom)


def test_a_sync_call_from_a_running_loop_blocks_on_the_library_loop():
    async def caller() -> tuple[int, asyncio.AbstractEventLoop]:
        return run_sync(where)

    ident, loop = asyncio.run(caller())
    assert loop is library_loop() and ident != threading.get_ident()


def test_a_sync_call_from_the_library_loop_raises_instead_of_waiting_for_itself():
    async def inside() -> str:
        assert on_library_loop()
        try:
            run_sync(where)
        except RuntimeError as e:
            return str(e)
        return "no error"

    assert "await the async form" in run_sync(inside)


def serve_keep_alive() -> FakeServer:
    return FakeServer({"/v1/chat/completions": lambda k, b: (200, chat_reply(b["n"]))}, keep_alive=True)


def server(url: str) -> OpenAIServer:
    return OpenAIServer(url, model="fake", system_role=False)


@pytest.mark.parametrize("calls", [3])
def test_sync_calls_share_one_session_and_one_connection(calls: int):
    srv = serve_keep_alive()
    backend = server(srv.url)
    try:
        for i in range(calls):
            [res] = backend.generate([GenerationRequest("S", f"U{i}")])
            assert res.error is None and res.completions[0].text == "Good. [RESULT] 4 #0"
        assert len(srv.peers) == calls and len(set(srv.peers)) == 1  # one TCP connection, kept alive
        assert len(backend._sessions) == 1
    finally:
        backend.close()
        srv.stop()
    assert len(backend._sessions) == 0


def test_an_async_caller_gets_its_own_loops_session_and_closes_it():
    srv = serve_keep_alive()
    backend = server(srv.url)

    async def main() -> list[int]:
        idents = []
        for i in range(2):
            [res] = await backend.agenerate([GenerationRequest("S", f"U{i}")])
            assert res.error is None
            idents.append(threading.get_ident())
        await backend.aclose()
        return idents

    try:
        backend.generate([GenerationRequest("S", "sync first")])  # a session on the library loop
        assert asyncio.run(main()) == [threading.get_ident()] * 2
        assert len(set(srv.peers[1:])) == 1 and srv.peers[1] != srv.peers[0]  # one per loop
        assert len(backend._sessions) == 0
    finally:
        srv.stop()


def test_a_copy_makes_its_own_session():
    srv = serve_keep_alive()
    backend = server(srv.url)
    try:
        backend.generate([GenerationRequest("S", "U")])
        for clone in (pickle.loads(pickle.dumps(backend)), copy.deepcopy(backend)):
            assert len(clone._sessions) == 0
            [res] = clone.generate([GenerationRequest("S", "U")])
            assert res.error is None and len(clone._sessions) == 1
            clone.close()
    finally:
        backend.close()
        srv.stop()


def test_sessions_of_loops_closed_without_aclose_are_dropped_quietly(caplog):
    srv = serve_keep_alive()
    backend = server(srv.url)
    gc.collect()  # what earlier tests left is not this test's
    caplog.clear()
    try:
        for i in range(3):  # asyncio.run per call, never aclose(): each loop closes with its session open
            [res] = asyncio.run(backend.agenerate([GenerationRequest("S", f"U{i}")]))
            assert res.error is None
        assert len(backend._sessions) == 1  # the earlier loops' sessions were dropped
        gc.collect()
        assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]
    finally:
        backend.close()
        srv.stop()


@pytest.mark.parametrize("where", ["sync", "own-loop", "in-a-cycle"])
def test_a_backend_dropped_unclosed_closes_its_sessions_quietly(where, caplog):
    srv = serve_keep_alive()
    gc.collect()
    caplog.clear()

    async def dropped_on_a_running_loop() -> list[aiohttp.ClientSession]:
        backend = server(srv.url)
        await backend.agenerate([GenerationRequest("S", "U")])
        sessions = list(backend._sessions._by_loop.values())
        backend.me = backend if where == "in-a-cycle" else None  # cyclic garbage: finalizers in any order
        del backend
        gc.collect()
        await asyncio.sleep(0.05)  # the scheduled close runs on this loop
        return sessions

    try:
        if where == "sync":
            backend = server(srv.url)
            backend.generate([GenerationRequest("S", "U")])  # a session on the library's loop
            sessions = list(backend._sessions._by_loop.values())
            del backend
            gc.collect()
            time.sleep(0.05)
        else:
            sessions = asyncio.run(dropped_on_a_running_loop())  # or dropped as asyncio.run ends its loop
        assert len(sessions) == 1 and sessions[0].closed
        del sessions
        gc.collect()
        assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]
    finally:
        srv.stop()
