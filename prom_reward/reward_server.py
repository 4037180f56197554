"""An HTTP reward endpoint for OpenRLHF's remote reward model (``--reward.remote_url``).

OpenRLHF posts ``{"query": [...], "prompts": [...], "labels": [...]}``: each query is
the decoded prompt + response, so the response is what follows ``prompts[i]`` in
``query[i]`` (a query that does not start with its prompt is a 422 naming the index).
``labels`` (optional) become each item's reference answer. The reply is
``{"rewards": [...], "scores": [...], "extra_logs": {...}, "judge_failures": n}``.

OpenRLHF turns ``rewards`` into a tensor, so it cannot carry ``null``: an item the judge
failed on gets ``failure_reward`` (0.0 by default) and is flagged in
``extra_logs["judge_failed"]`` (1.0 / 0.0 per item); ``judge_failures`` counts them.
Every ``extra_logs`` value is a per-item list of floats (batch metrics repeated).

Errors: 400 malformed JSON, 422 wrong types / lengths / a query not starting with its
prompt, 413 body over ``max_body_bytes``, 401 missing or wrong bearer token, 503 the
judge backend failed. Judge calls run one at a time in a worker thread.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.reward import PrometheusReward
    >>> app = create_app(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"])))
    >>> sorted(r.path for r in app.routes)
    ['/', '/get_reward', '/health']
    >>> serve_reward(PrometheusReward({"model": "prometheus-7b-v2.0"}), port=5000)  # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from typing import Any, Sequence

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .errors import BackendError, ConfigError, InputError, PromRewardError

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
logger = logging.getLogger(__name__)


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise _HTTPError(400, f"bad Content-Length header {declared!r}") from None
        if size > limit:
            raise _HTTPError(413, f"body of {size} bytes is over the limit of {limit} bytes")
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise _HTTPError(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _string_list(data: dict[str, Any], key: str, n: int | None) -> list[str]:
    values = data.get(key)
    if not isinstance(values, list):
        raise _HTTPError(422, f"{key!r}: expected a list of strings, got {type(values).__name__}")
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise _HTTPError(422, f"{key!r}[{i}]: expected a string, got {type(v).__name__}")
    if n is not None and len(values) != n:
        raise _HTTPError(422, f"{key!r}: expected {n} items (one per query), got {len(values)}")
    return values


def _labels(data: dict[str, Any], n: int) -> list[str | None] | None:
    values = data.get("labels")
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n:
        got = f"{len(values)} items" if isinstance(values, list) else type(values).__name__
        raise _HTTPError(422, f"'labels': expected a list of {n} items (one per query) or null, got {got}")
    out: list[str | None] = []
    for i, v in enumerate(values):
        if v is not None and not isinstance(v, (str, int, float)):
            raise _HTTPError(422, f"'labels'[{i}]: expected a string, number or null, got {type(v).__name__}")
        out.append(None if v is None or v == "" else str(v))
    return out


def split_queries(queries: Sequence[str], prompts: Sequence[str], strip: Sequence[str] = ()) -> list[str]:
    """Responses from OpenRLHF queries (prompt + response), removing any of ``strip`` from their ends.

    >>> split_queries(["Q: hi A: hello</s>"], ["Q: hi A:"], strip=["</s>"])
    ['hello']
    """
    out = []
    for i, (q, p) in enumerate(zip(queries, prompts)):
        if not q.startswith(p):
            raise InputError(f"item {i}: query does not start with its prompt (query {q[:60]!r}..., "
                             f"prompt {p[:60]!r}...)", index=i, field="query")
        response = q[len(p):]
        changed = True
        while changed:
            changed = False
            for s in strip:
                if s and response.endswith(s):
                    response, changed = response[: -len(s)], True
        out.append(response.strip())
    return out


def create_app(reward: Any, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               failure_reward: float = 0.0, strip: Sequence[str] = ()) -> Starlette:
    """The ASGI app: ``POST /`` (alias ``/get_reward``) and ``GET /health``.

    Args:
        reward: a ``PrometheusReward`` (any callable ``reward(prompts, completions, **columns)``
            returning ``list[float | None]`` with a ``last_metrics`` dict).
        token: require ``Authorization: Bearer <token>`` on reward requests (None: no auth).
        max_body_bytes: larger bodies get 413.
        failure_reward: the reward sent for items the judge failed on (flagged in extra_logs).
        strip: end-of-text strings removed from the end of each response (e.g. ``"<|im_end|>"``).
    """
    if max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes must be >= 1, got {max_body_bytes!r}")
    lock = threading.Lock()
    reference_column = getattr(getattr(reward, "config", None), "reference_column", "reference_answer")

    def judge(prompts: list[str], responses: list[str], labels: list[str | None] | None) -> list[float | None]:
        columns = {reference_column: labels} if labels is not None else {}
        with lock:
            return list(reward(prompts, responses, **columns))

    async def get_reward(request: Request) -> JSONResponse:
        try:
            if token is not None:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    raise _HTTPError(401, "missing or wrong bearer token (send 'Authorization: Bearer <token>')")
            body = await _read_body(request, max_body_bytes)
            try:
                data = json.loads(body)
            except ValueError as e:
                raise _HTTPError(400, f"malformed JSON: {e}") from None
            if not isinstance(data, dict):
                raise _HTTPError(422, f"expected a JSON object with 'query' and 'prompts', got {type(data).__name__}")
            queries = _string_list(data, "query", None)
            prompts = _string_list(data, "prompts", len(queries))
            labels = _labels(data, len(queries))
            responses = split_queries(queries, prompts, strip)
            raw = await run_in_threadpool(judge, prompts, responses, labels) if queries else []
        except _HTTPError as e:
            return _error(e.status, str(e))
        except InputError as e:
            return _error(422, str(e))
        except BackendError as e:
            logger.error("judge backend failed: %s", e)
            return _error(503, f"judge backend failed: {e}")
        except PromRewardError as e:
            return _error(500, str(e))
        failed = [r is None for r in raw]
        rewards = [failure_reward if r is None else float(r) for r in raw]
        n = len(rewards)
        extra: dict[str, list[float]] = {"judge_failed": [float(f) for f in failed]}
        metrics = (getattr(reward, "last_metrics", None) or {}) if n else {}
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and value == value:  # NaN does not travel as JSON
                extra[key] = [float(value)] * n
        if any(failed):
            logger.warning("judge failed on %d of %d items; sent %s for them", sum(failed), n, failure_reward)
        return JSONResponse({"rewards": rewards, "scores": rewards, "extra_logs": extra,
                             "judge_failures": sum(failed)})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/", get_reward, methods=["POST"]),
        Route("/get_reward", get_reward, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ])


def serve_reward(reward: Any, host: str = "127.0.0.1", port: int = 5000, token: str | None = None,
                 **app_options: Any) -> None:
    """Serve ``create_app(reward, ...)`` with uvicorn until interrupted (127.0.0.1 unless told)."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1") and token is None:
        logger.warning("serving the reward on %s without a token: anyone who can reach it can use the judge", host)
    uvicorn.run(create_app(reward, token=token, **app_options), host=host, port=port, log_level="info")
