"""The one bridge from sync code to the async core: ``run_sync`` runs a coroutine on the library's one
long-lived event loop (a daemon thread), and ``close_at_exit`` closes what lives on it at exit."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None
_closing: set[asyncio.Task[object]] = set()  # closes scheduled on the caller's loop, held until done
CLOSE_WAIT_S = 5.0
"""Seconds ``close_on_loop`` waits for a close on another thread's loop."""
_open: weakref.WeakSet[Any] = weakref.WeakSet()  # closed at exit, if still alive then (close_at_exit)


async def _serve(ready: concurrent.futures.Future[asyncio.AbstractEventLoop]) -> None:
    """The loop thread's main coroutine: hands its loop out, then waits for ever (the thread is a daemon)."""
    ready.set_result(asyncio.get_running_loop())
    await asyncio.Event().wait()


def library_loop() -> asyncio.AbstractEventLoop:
    """The library's event loop, its thread started on first use (and again in a forked child)."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _thread is None or not _thread.is_alive():
            ready: concurrent.futures.Future[asyncio.AbstractEventLoop] = concurrent.futures.Future()
            _thread = threading.Thread(target=asyncio.run, args=(_serve(ready),), name="prom-reward-loop", daemon=True)
            _thread.start()
            _loop, _pid = ready.result(), os.getpid()
        return _loop


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop this thread runs, None when it runs none."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_library_loop() -> bool:
    """True inside a coroutine or callback running on the library's loop (where ``run_sync`` would deadlock)."""
    running = running_loop()
    return running is not None and running is _loop and _pid == os.getpid()


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``factory()`` on the library's loop and wait for its result (an interrupt cancels it).
    From the library's own loop it raises: await the async form there."""
    if on_library_loop():
        raise RuntimeError(
            "a sync prom_reward call was made from the library's event loop, where it would wait for itself; "
            "await the async form (agenerate, agrade, acompare, acompute) there instead"
        )
    future = asyncio.run_coroutine_threadsafe(_awaited(factory), library_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def _awaited(factory: Callable[[], Awaitable[T]]) -> T:
    """``factory()`` awaited: a coroutine of any awaitable, made on the loop that runs it."""
    return await factory()


def sync_method(amethod: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """The sync form of the async method ``amethod`` (its signature and docstring): ``run_sync`` of it."""

    @functools.wraps(amethod)
    def method(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(lambda: amethod(*args, **kwargs))

    method.__name__ = method.__qualname__ = amethod.__name__.removeprefix("a")
    return method


def close_on_loop(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[object]]) -> None:
    """Run a resource's async ``close()`` on its loop from any thread: awaited (up to ``CLOSE_WAIT_S``) on another
    thread's, scheduled on the caller's own, skipped when the loop is closed or not running."""
    if loop.is_closed():
        return
    if running_loop() is loop:
        task = loop.create_task(_awaited(close))
        _closing.add(task)
        task.add_done_callback(_closing.discard)
    elif loop.is_running():
        future = asyncio.run_coroutine_threadsafe(_awaited(close), loop)
        try:
            future.result(timeout=CLOSE_WAIT_S)
        except (concurrent.futures.TimeoutError, OSError, RuntimeError):
            future.cancel()


def close_at_exit(resource: Any) -> None:
    """Have ``resource.close()`` called at exit if it is still alive, while the library's loop still runs (so an
    aiohttp session is closed on its loop)."""
    _open.add(resource)


@atexit.register
def _close_open() -> None:
    """Close every resource ``close_at_exit`` registered that is still alive."""
    for resource in list(_open):
        resource.close()
