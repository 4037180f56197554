"""HTTP transport for ``OpenAIServer``: one client per batch, URL choice, retries with back-off.

``HTTPBatch`` lives inside one running event loop (one ``agenerate`` call): it owns an
``aiohttp.ClientSession`` and a semaphore bounding calls in flight; which URL gets each call
is the backend's ``EndpointPool``'s choice (``_endpoints``), which outlives the batch.
``call`` sends one logical request to the up URL with the fewest outstanding calls and
retries connection errors, timeouts, 5xx, 429 and replies that ``parse`` rejects, each
retry on another URL when there is one. Other 4xx replies raise at once: ``ServerRejected``, or
``JudgeConfigError`` for a configuration failure (``_openai_wire.rejection``). Out URLs whose
probe time has come are health-probed in the background of the batch.
A call given a ``deadline`` (the request's, set by a reward's outage policy) cuts each attempt
to the time left and starts none after it; what a reward does with a request that still failed
(wait the outage out, give up) is the reward's outage policy (``prom_reward.rewards.outage``).
The transport is aiohttp: at 64 calls in flight httpx's connection pool spent ~25x more
CPU per request on bookkeeping (``benchmarks/client_overhead.py``).

Example:
    >>> async def models(url):  # doctest: +SKIP
    ...     b = HTTPBatch(EndpointPool([url]), api_key=None, max_concurrency=4, timeout=10, max_retries=2,
    ...                   backoff=0.1)
    ...     try:
    ...         return await b.call("GET", "/models", parse=lambda d: [m["id"] for m in d["data"]])
    ...     finally:
    ...         await b.aclose()
    >>> run_sync(lambda: models("http://127.0.0.1:8000/v1"))  # doctest: +SKIP
    ['prometheus-eval/prometheus-7b-v2.0']
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import aiohttp

from prom_reward.backends._endpoints import EndpointPool
from prom_reward.backends._openai_wire import error_text, rejection
from prom_reward.errors import BackendError

T = TypeVar("T")
log = logging.getLogger(__name__)


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``factory()`` to completion from sync code. Inside a running
    event loop it runs on a fresh loop in a worker thread (blocking the caller)."""

    def main() -> T:
        return asyncio.run(factory())  # type: ignore[arg-type]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return main()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(main).result()


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


def _root(url: str) -> str:
    """The server root of a ``.../v1`` base URL (vLLM's ``/tokenize`` lives there)."""
    return url[:-3] if url.endswith("/v1") else url


class HTTPBatch:
    """Per-batch HTTP state; make it inside the running loop and ``aclose`` it after."""

    def __init__(
        self,
        pool: EndpointPool,
        *,
        api_key: str | None,
        max_concurrency: int,
        timeout: float,
        max_retries: int,
        backoff: float,
        probe_timeout: float = 5.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            connector=aiohttp.TCPConnector(limit=max_concurrency + 4),
            raise_for_status=False,
        )
        self.sem = asyncio.Semaphore(max_concurrency)
        self.pool = pool
        self.max_retries, self.backoff, self.timeout = max_retries, backoff, timeout
        self.probe_timeout = min(probe_timeout, timeout)
        self._probes: set[asyncio.Task[None]] = set()

    def _start_probes(self) -> None:
        for url in self.pool.due_probes():
            task = asyncio.ensure_future(self._probe(url))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)

    async def _probe(self, url: str) -> None:
        """Health-probe an out URL: vLLM's ``/health`` at the root, else ``GET /models``."""
        ok = False
        try:
            for full in (_root(url) + "/health", url + "/models"):
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
        """``method path`` (under the base URL, or the server root when ``root``), retried;
        returns ``parse(reply JSON)``. ``index`` names the request in error messages; ``deadline``
        (monotonic) cuts every attempt to the time left and starts none after it."""
        what = f"{method} {path}" + (f" for request {index}" if index is not None else "")
        last, url, tried = "", None, []
        first_failure: float | None = None
        attempt = 0
        while True:
            if attempt:
                delay = self.backoff * 2 ** (attempt - 1)
                if attempt > self.max_retries or (deadline is not None and time.monotonic() + delay >= deadline):
                    break
                log.info("%s: attempt %d failed (%s); retrying in %.1f s", what, attempt, last, delay)
                await asyncio.sleep(delay)
            options: dict[str, Any] = {}
            if deadline is not None:
                seconds = min(deadline - time.monotonic(), self.timeout)
                if seconds <= 0:
                    last = last or "the call's deadline passed before the judge was asked"
                    break
                options["timeout"] = aiohttp.ClientTimeout(total=seconds)
            attempt += 1
            async with self.sem:
                self._start_probes()
                url = self.pool.pick(avoid=url)
                full = (_root(url) if root else url) + path
                tried.append(url)
                self.pool.sent(url)
                try:
                    async with self.client.request(method, full, json=payload, **options) as resp:
                        status, content = resp.status, await resp.read()
                except (TimeoutError, aiohttp.ClientError) as e:  # refused, reset, timeouts
                    kind = "Timeout" if isinstance(e, asyncio.TimeoutError) else type(e).__name__
                    last = f"{kind} on {full}" + (f": {e}" if str(e) else "")
                    first_failure = self._failed(url, first_failure)
                    continue
                finally:
                    self.pool.answered(url)
            if status == 429 or status >= 500:
                last = f"HTTP {status} from {full}: {error_text(content)}"
                first_failure = self._failed(url, first_failure)
                continue
            if status >= 400:
                self.pool.succeeded(url)  # the server is healthy; the request is wrong
                raise rejection(what, url, full, status, content, root=root)
            try:
                result = parse(json.loads(content))
            except (ValueError, KeyError, TypeError, IndexError) as e:  # includes MalformedReply
                last = f"malformed reply from {full}: {e}"
                first_failure = self._failed(url, first_failure)
                continue
            self.pool.succeeded(url)
            return result
        out = [u for u in dict.fromkeys(tried) if not self.pool.is_up(u)]
        took = f" over {time.monotonic() - first_failure:.1f} s" if first_failure is not None else ""
        raise BackendError(
            f"{what} failed after {len(tried)} attempt(s){took} on {', '.join(sorted(set(tried))) or 'no URL'}; "
            f"last error: {last}."
            + (f" Taken out after repeated failures: {', '.join(out)}." if out else "")
            + " Check that the server is up and reachable, or raise the outage budget / timeout"
        )

    def _failed(self, url: str, first: float | None) -> float:
        """Record a failed attempt; returns the time of the call's first failure."""
        self.pool.failed(url)
        return time.monotonic() if first is None else first

    async def aclose(self) -> None:
        for task in list(self._probes):
            task.cancel()
        if self._probes:
            await asyncio.gather(*self._probes, return_exceptions=True)
        await self.client.close()
