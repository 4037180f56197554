"""HTTP transport for ``OpenAIServer``: which judge servers get traffic, across calls (``EndpointPool``: least
calls in flight, ejection after ``eject_after`` failures, health probes; the policy is in docs/design-notes.md) and
the calls of one batch (``HTTPBatch``) on a session of its loop (``_sessions``), one attempt per call cut at its
deadline (retries are the outage policy's)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from prom_reward.backends._openai_wire import MalformedReply, error_text, rejection
from prom_reward.errors import BackendError

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_REPLY_BYTES = 512 << 20
"""The largest reply read: a server that sends (or announces) more fails the call instead of filling memory."""
PROBE_TIMEOUT_S = 5.0  # a health probe's limit (the call's timeout when shorter)


@dataclass
class EndpointState:
    """What the pool knows of one base URL."""

    in_flight: int = 0
    strikes: int = 0
    """Consecutive failures (reset by any success)."""
    failed_at: float = -math.inf
    out_until: float | None = None
    """Monotonic time from which an out URL may be probed; None while up."""
    interval: float = 0.0
    """The current wait before the next probe (doubles after each failed probe)."""
    probing: bool = False
    requests: int = 0
    failures: int = 0
    ejections: int = 0


class EndpointPool:
    """Load balancing and ejection over several base URLs."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        eject_after: int = 3,
        probe_interval: float = 5.0,
        max_probe_interval: float = 60.0,
    ) -> None:
        self.urls = list(urls)
        self.eject_after, self.probe_interval = eject_after, float(probe_interval)
        self.max_probe_interval = max(float(max_probe_interval), self.probe_interval)
        self._lock = threading.RLock()  # (pick takes it, then sent)
        self._state = {u: EndpointState() for u in self.urls}
        self._turn = 0
        self.out = 0
        """How many URLs are out (read without the lock: a call that misses a change probes at the next)."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and copied) as a fresh pool with the same options: health is per process."""
        options = {k: getattr(self, k) for k in ("eject_after", "probe_interval", "max_probe_interval")}
        return functools.partial(EndpointPool, self.urls, **options), ()

    def is_up(self, url: str) -> bool:
        return self._state[url].out_until is None

    def pick(self, *, now: float | None = None, sent: bool = False) -> str:
        """The URL for the next call: an up URL (not one that failed in the last ``probe_interval`` seconds
        when another is clean) with the fewest calls in flight, ties rotating; with none up, the out URL due
        soonest. ``sent``: the call is sent to it now (``sent``)."""
        with self._lock:
            url = self._pick(time.monotonic() if now is None else now)
            if sent:
                self.sent(url)
            return url

    def _pick(self, now: float) -> str:
        if len(self.urls) == 1:
            return self.urls[0]
        self._turn += 1
        up = [u for u in self.urls if self._state[u].out_until is None]
        recent = now - self.probe_interval
        pool = [u for u in up if not self._state[u].strikes or self._state[u].failed_at < recent] or up
        if pool:
            shift = self._turn % len(pool)
            return min(pool[shift:] + pool[:shift], key=lambda u: self._state[u].in_flight)
        return min(self.urls, key=lambda u: self._state[u].out_until or 0.0)

    def sent(self, url: str) -> None:
        with self._lock:
            s = self._state[url]
            s.in_flight += 1
            s.requests += 1

    def answered(self, url: str) -> None:
        with self._lock:
            self._state[url].in_flight -= 1

    def succeeded(self, url: str) -> None:
        """A good reply (or probe): the URL is up again with no strikes."""
        if not (s := self._state[url]).strikes and s.out_until is None and not s.probing:
            return  # (nothing to reset: no lock taken on the common path)
        with self._lock:
            s = self._state[url]
            if s.out_until is not None:
                log.warning("judge endpoint %s is back in", url)
                self.out -= 1
            s.strikes, s.out_until, s.interval, s.probing = 0, None, 0.0, False

    def failed(self, url: str, *, now: float | None = None) -> None:
        """A failed call: one more strike; ``eject_after`` in a row take the URL out."""
        now = time.monotonic() if now is None else now
        with self._lock:
            s = self._state[url]
            s.strikes += 1
            s.failures += 1
            s.failed_at = now
            if s.out_until is None and s.strikes >= self.eject_after:
                s.interval = self.probe_interval
                s.out_until = now + s.interval
                s.ejections += 1
                self.out += 1
                log.warning(
                    "judge endpoint %s taken out after %d failures in a row; probing it again in %.1fs",
                    url,
                    s.strikes,
                    s.interval,
                )
            elif s.out_until is not None:  # used while out (every URL was out): wait longer
                s.out_until = now + s.interval

    def due_probes(self, *, now: float | None = None) -> list[str]:
        """Out URLs whose probe time has come (marked as being probed: call ``probe_done``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [
                u for u, s in self._state.items() if s.out_until is not None and s.out_until <= now and not s.probing
            ]
            for u in due:
                self._state[u].probing = True
            return due

    def probe_done(self, url: str, ok: bool, *, now: float | None = None) -> None:
        """Record a probe's outcome: ok brings the URL back, else it stays out twice as long."""
        if ok:
            self.succeeded(url)
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            s = self._state[url]
            s.probing = False
            if s.out_until is not None:
                s.interval = min(max(s.interval, self.probe_interval) * 2, self.max_probe_interval)
                s.out_until = now + s.interval

    def probe_abandoned(self, url: str) -> None:
        """A probe cut short (its batch ended): probe again when next due."""
        with self._lock:
            self._state[url].probing = False

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per URL: ``up``, ``in_flight``, ``requests``, ``failures``, ``ejections``, ``strikes``."""
        counters = ("in_flight", "requests", "failures", "ejections", "strikes")
        with self._lock:
            return {
                u: {"up": s.out_until is None, **{k: getattr(s, k) for k in counters}} for u, s in self._state.items()
            }


async def gather_all(aws: Iterable[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that cancels (and awaits) the other tasks when one fails."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def read_body(resp: aiohttp.ClientResponse) -> bytes | None:
    """The reply's body; None when it is (or says it is) over ``MAX_REPLY_BYTES``."""
    length = resp.content_length
    if length is not None:
        return await resp.read() if length <= MAX_REPLY_BYTES else None
    chunks, size = [], 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass(eq=False)
class HTTPBatch:
    """Per-batch HTTP state on a session of the running loop (``deadline`` bounds every call given no deadline of
    its own); ``aclose`` stops its health probes."""

    pool: EndpointPool
    client: aiohttp.ClientSession
    concurrency: int
    timeout: float
    deadline: float | None

    def __post_init__(self) -> None:
        self.sem = asyncio.Semaphore(self.concurrency)
        self.probe_timeout = min(PROBE_TIMEOUT_S, self.timeout)
        self._probes: set[asyncio.Task[None]] = set()

    async def _probe(self, url: str) -> None:
        """Health-probe an out URL: vLLM's ``/health`` at the root, else ``GET /models``."""
        ok = False
        try:
            for full in (url.removesuffix("/v1") + "/health", url + "/models"):
                async with self.client.get(full, timeout=aiohttp.ClientTimeout(total=self.probe_timeout)) as resp:
                    status = resp.status
                if status == 200:
                    ok = True
                    break
                if status not in (404, 405):
                    break
        except (TimeoutError, aiohttp.ClientError):
            ok = False
        except asyncio.CancelledError:
            self.pool.probe_abandoned(url)
            raise
        self.pool.probe_done(url, ok)

    async def call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        index: int | None = None,
        root: bool = False,
        parse: Callable[[Any], T] = lambda d: d,
        deadline: float | None = None,
    ) -> T:
        """``method path`` (under the base URL, or the server root), one attempt cut to ``deadline``: returns
        ``parse(reply JSON)``, else raises ``BackendError`` (``ServerRejected`` for a 4xx) naming request ``index``.
        ``payload``: the JSON body, or a function making it once a slot is free (a batch holds only those in flight)."""
        options: dict[str, Any] = {}
        what = f"{method} {path}" + (f" for request {index}" if index is not None else "")  # as its errors name it
        deadline = self.deadline if deadline is None else deadline
        seconds = self.timeout  # the session's bound, unless the deadline is nearer
        if deadline is not None:
            seconds = min(deadline - time.monotonic(), self.timeout)
            if seconds <= 0:
                raise BackendError(f"{what}: the call's deadline passed before the judge was asked")
            options["timeout"] = aiohttp.ClientTimeout(total=seconds)
        async with self.sem:
            if self.pool.out:  # health-probe the out URLs due now
                for out in self.pool.due_probes():
                    task = asyncio.ensure_future(self._probe(out))
                    self._probes.add(task)
                    task.add_done_callback(self._probes.discard)
            payload = payload() if callable(payload) else payload
            url = self.pool.pick(sent=True)
            full = (url.removesuffix("/v1") if root else url) + path  # root: vLLM's /tokenize
            try:
                async with self.client.request(method, full, json=payload, **options) as resp:
                    status, content = resp.status, await read_body(resp)
            except (TimeoutError, aiohttp.ClientError) as e:  # refused, reset, timeouts
                if isinstance(e, asyncio.TimeoutError):
                    cause = f"Timeout on {full} (no whole reply within {seconds:.3g} s)"
                else:
                    cause = f"{type(e).__name__} on {full}"
                cause += f": {e}" if str(e) else ""
                raise self._failed(what, url, cause) from None
            finally:
                self.pool.answered(url)
        if content is None:
            cause = f"the reply from {full} is over {MAX_REPLY_BYTES >> 20} MiB (not read)"
            raise self._failed(what, url, cause)
        if status == 429 or status >= 500:
            raise self._failed(what, url, f"HTTP {status} from {full}: {error_text(content)}")
        if status >= 400:
            self.pool.succeeded(url)  # the server is healthy; the request is wrong
            raise rejection(what, url, full, status, content, root=root)
        try:
            result = parse(json.loads(content))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            # RecursionError: JSON nested past Python's recursion limit
            cause = str(e) if isinstance(e, MalformedReply) else f"{type(e).__name__}: {e}"
            reply = content[:300].decode("utf-8", "replace")
            cause = f"malformed reply from {full}: {cause} (reply: {reply})"
            raise self._failed(what, url, cause) from None
        self.pool.succeeded(url)
        return result

    def _failed(self, what: str, url: str, cause: str) -> BackendError:
        """Record a failed call on ``url``; the error that reports it (naming the URL if it is now out)."""
        self.pool.failed(url)
        out = "" if self.pool.is_up(url) else f" Taken out after repeated failures: {url}."
        return BackendError(
            f"{what} failed: {cause}.{out} Check that the server is up and reachable, or raise the outage "
            "budget / timeout"
        )

    async def aclose(self) -> None:
        for task in list(self._probes):
            task.cancel()
        if self._probes:
            await asyncio.gather(*self._probes, return_exceptions=True)
