"""One long-lived aiohttp session per event loop for the judge client (``LoopSessions``), closed on its own loop,
and marked closed quietly when its loop is gone or its owner is dropped unclosed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import weakref
from typing import Any

import aiohttp

from prom_reward.backends.bridge import close_at_exit, close_on_loop, running_loop

KEEPALIVE_S = 3.0


def new_session(*, api_key: str | None, timeout: float) -> aiohttp.ClientSession:
    """A session bound to the running loop: bearer ``api_key``, ``timeout`` seconds per call, an unbounded pool
    (each batch bounds its calls), idle connections kept ``KEEPALIVE_S``: under uvicorn's 5 s, as aiohttp does
    not resend a POST on a connection the server closed."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return aiohttp.ClientSession(
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=timeout),
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S),
        raise_for_status=False,
    )


class LoopSessions:
    """One long-lived session per event loop, made on first use there, dropped once its loop is closed, closed by
    ``close``/``aclose`` (at the latest at exit). Pickled empty; a forked child drops its parent's untouched."""

    def __init__(self, *, api_key: str | None, timeout: float) -> None:
        self.api_key, self.timeout = api_key, timeout
        self._by_loop: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession]
        self._lock = threading.Lock()
        self._pid = -1
        self._own_process()
        close_at_exit(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return functools.partial(LoopSessions, api_key=self.api_key, timeout=self.timeout), ()

    def __len__(self) -> int:
        return len(self._by_loop)

    def get(self) -> aiohttp.ClientSession:
        """The running loop's session (made on its first use there)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._own_process()
            for gone in [old for old in self._by_loop if old.is_closed()]:
                _forget(self._by_loop.pop(gone))
            session = self._by_loop.get(loop)
            if session is None or session.closed:
                session = self._by_loop[loop] = new_session(api_key=self.api_key, timeout=self.timeout)
        return session

    def _own_process(self) -> None:
        """Forget (without touching) sessions inherited through a fork: their loops run in the parent only. This
        process's sessions are marked closed when this is dropped unclosed."""
        if self._pid != os.getpid():
            self._by_loop, self._pid = {}, os.getpid()
            weakref.finalize(self, _dropped, self._by_loop, self._pid)

    def close(self) -> None:
        """Close every session on its own loop; one whose loop no longer runs is marked closed. Safe twice."""
        with self._lock:
            self._own_process()
            sessions = dict(self._by_loop)
            self._by_loop.clear()
        for loop, session in sessions.items():
            if loop.is_running():
                close_on_loop(loop, session.close)
            else:
                _forget(session)

    async def aclose(self) -> None:
        """``close``, the running loop's session closed before this returns."""
        with self._lock:
            here = self._by_loop.pop(asyncio.get_running_loop(), None)
        self.close()
        if here is not None:
            await here.close()


def _dropped(by_loop: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession], pid: int) -> None:
    """The sessions of a ``LoopSessions`` dropped unclosed, marked closed (each on its loop's thread), quietly."""
    here = running_loop()
    for loop, session in by_loop.items() if pid == os.getpid() else ():
        if loop.is_running() and loop is not here:
            with contextlib.suppress(RuntimeError):  # closed meanwhile: marked here
                loop.call_soon_threadsafe(_forget, session)
                continue
        _forget(session)


def _forget(session: aiohttp.ClientSession) -> None:
    """Mark closed a session whose loop is gone (nothing can be awaited there): aiohttp's ``_close`` flags its
    connector, so no "Unclosed client session" is logged when it is collected."""
    connector = session.connector
    with contextlib.suppress(RuntimeError, AttributeError):  # another aiohttp: only the collector's warning is lost
        if connector is not None:
            connector._close()
