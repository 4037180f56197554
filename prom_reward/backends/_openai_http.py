"""HTTP transport for ``OpenAIServer``: one client per batch, URL choice, retries with back-off.

``HTTPBatch`` lives inside one running event loop (one ``agenerate`` call): it owns an
``httpx.AsyncClient``, a semaphore bounding calls in flight, and per-URL counters.
``call`` sends one logical request to the URL with the fewest outstanding calls
(URLs that just failed go last) and retries connection errors, timeouts, 5xx, 429 and
replies that ``parse`` rejects, each retry on another URL when there is one. Other 4xx
replies raise ``ServerRejected`` at once. Nothing here outlives the batch, so the
backend object stays picklable.

Example:
    >>> async def models(url):  # doctest: +SKIP
    ...     b = HTTPBatch([url], api_key=None, max_concurrency=4, timeout=10, max_retries=2, backoff=0.1)
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
from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar

import httpx

from ..errors import BackendError
from ._openai_wire import error_text

T = TypeVar("T")


class ServerRejected(BackendError):
    """The server answered 4xx (not 429): the request itself is wrong, so it is not retried."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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

    def __init__(self, urls: Sequence[str], *, api_key: str | None, max_concurrency: int, timeout: float,
                 max_retries: int, backoff: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_concurrency + 4)
        self.client = httpx.AsyncClient(timeout=timeout, headers=headers, limits=limits)
        self.sem = asyncio.Semaphore(max_concurrency)
        self.max_retries, self.backoff = max_retries, backoff
        self.load = {u: 0 for u in urls}  # calls in flight per URL
        self.strikes = {u: 0 for u in urls}  # consecutive failures per URL
        self._turn = 0

    def pick(self, avoid: str | None = None) -> str:
        """The URL to use next: fewest recent failures, then fewest calls in flight; ties rotate."""
        urls = [u for u in self.load if u != avoid] or list(self.load)
        self._turn += 1
        shift = self._turn % len(urls)
        return min(urls[shift:] + urls[:shift], key=lambda u: (self.strikes[u], self.load[u]))

    async def call(self, method: str, path: str, payload: Any = None, *, index: int | None = None,
                   root: bool = False, parse: Callable[[Any], T] = lambda d: d) -> T:
        """``method path`` (under the base URL, or the server root when ``root``), retried;
        returns ``parse(reply JSON)``. ``index`` names the request in error messages."""
        what = f"{method} {path}" + (f" for request {index}" if index is not None else "")
        last, url, tried = "", None, []
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
            url = self.pick(avoid=url)
            full = (_root(url) if root else url) + path
            tried.append(url)
            async with self.sem:
                self.load[url] += 1
                try:
                    resp = await self.client.request(method, full, json=payload)
                except httpx.HTTPError as e:  # refused, reset, timeouts, broken replies
                    last = f"{type(e).__name__} on {full}" + (f": {e}" if str(e) else "")
                    self.strikes[url] += 1
                    continue
                finally:
                    self.load[url] -= 1
            if resp.status_code == 429 or resp.status_code >= 500:
                last = f"HTTP {resp.status_code} from {full}: {error_text(resp.content)}"
                self.strikes[url] += 1
                continue
            if resp.status_code >= 400:
                raise ServerRejected(
                    f"{what}: the server at {full} rejected it (HTTP {resp.status_code}): "
                    f"{error_text(resp.content)}; fix the request or the server options", resp.status_code)
            try:
                result = parse(resp.json())
            except (ValueError, KeyError, TypeError, IndexError) as e:  # includes MalformedReply
                last = f"malformed reply from {full}: {e}"
                self.strikes[url] += 1
                continue
            self.strikes[url] = 0
            return result
        raise BackendError(
            f"{what} failed after {len(tried)} attempt(s) on {', '.join(sorted(set(tried)))}; last error: "
            f"{last}. Check that the server is up and reachable, or raise timeout/max_retries")

    async def aclose(self) -> None:
        await self.client.aclose()
