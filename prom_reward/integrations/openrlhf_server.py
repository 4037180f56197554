"""An HTTP reward endpoint for OpenRLHF's remote reward model (``--reward.remote_url http://...``).

OpenRLHF 0.11 posts one sample per request, ``{"query": [q], "prompts": [p], "labels": [l]}``,
from every rollout at once, with a 180 s client timeout, five tries and no headers. This
server queues the samples of concurrent requests in a ``BatchedReward``: requests arriving
within ``batch_window_ms`` of each other (up to ``max_batch_size`` samples) are judged in
one batched judge call.

- Queries, left-truncated prompts and labels are read by ``openrlhf_inputs``; a sample that
  cannot be judged is answered as a failed sample with its reason, not as an HTTP error.
- Reply: ``{"rewards", "scores", "extra_logs", "judge_failures", "failure_reasons"}``.
  ``extra_logs`` has the same keys in every reply of one server (``BatchedReward.extra_log_keys``:
  ``judge_failed`` per sample, batch size, queue time, the batch's metrics), one float per sample.
- A failed sample gets ``failure_reward`` (required: a number or ``"min"``), is flagged
  ``judge_failed=1``, counted (``judge_failures``; running totals on ``GET /stats``) and logged.
- Deadline: a request still unanswered after ``request_timeout`` (default 170 s, under
  OpenRLHF's 180 s) is answered 200 with its samples failed (reason says so): any non-200
  would make OpenRLHF retry five times against the same overloaded judge and then keep a
  sample without a reward, which breaks its batching later.
- A request whose client disconnected while queued is dropped unjudged.
- Auth: ``token`` in the URL query (``/get_reward?token=SECRET``, what OpenRLHF can send)
  or an ``Authorization: Bearer`` header; compared in constant time.

Errors (not from OpenRLHF's own requests unless misconfigured): 400 malformed JSON, 422 wrong
types or lengths, 413 body over ``max_body_bytes``, 401 token, 503 judge backend down.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.rewards.reward import PrometheusReward
    >>> app = create_app(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"])),
    ...                  failure_reward="min")
    >>> sorted(r.path for r in app.routes)
    ['/', '/get_reward', '/health', '/stats']
    >>> app.state.batched.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.errors import BackendError, ConfigError, InputError, PromRewardError
from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, JobResult
from prom_reward.integrations.openrlhf_inputs import drop_invalid, make_jobs, reward_dict, split_query, unjudged

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
OPENRLHF_CLIENT_TIMEOUT_S = 180.0
logger = logging.getLogger(__name__)

__all__ = ["ServerConfig", "create_app", "serve_reward", "split_queries", "DEFAULT_MAX_BODY_BYTES"]


@dataclass(frozen=True)
class ServerConfig:
    """Options of the reward server (validated on construction)."""

    failure_reward: Any
    """Reward for a failed sample: a number or ``"min"`` (required; see ``FailurePolicy``)."""
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    strip: tuple[str, ...] = ()
    """End-of-text strings removed from the end of each response."""
    batch_window_ms: float = 50.0
    """How long a sample waits for company before its batch goes to the judge."""
    max_batch_size: int = 256
    request_timeout: float = 170.0
    """Seconds after which a request is answered with its samples failed (keep it under OpenRLHF's 180 s)."""
    group_size: int | None = None
    """``pairwise_group``: samples per prompt (OpenRLHF ``--rollout.n_samples_per_prompt``)."""
    group_wait_s: float = 60.0
    poll_s: float = 0.1
    """How often a waiting request checks whether its client is still connected."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_reward", FailurePolicy(self.failure_reward))
        object.__setattr__(self, "strip", tuple(self.strip))
        if not (isinstance(self.max_body_bytes, int) and self.max_body_bytes >= 1):
            raise ConfigError(f"max_body_bytes: expected an int >= 1, got {self.max_body_bytes!r}")
        if not (isinstance(self.request_timeout, (int, float)) and self.request_timeout > 0):
            raise ConfigError(f"request_timeout: expected seconds > 0, got {self.request_timeout!r}")
        if self.request_timeout >= OPENRLHF_CLIENT_TIMEOUT_S:
            logger.warning("request_timeout %.0f s is not under OpenRLHF's client timeout of 180 s: a slow batch "
                           "then makes OpenRLHF retry instead of getting an answer", self.request_timeout)
        if not (isinstance(self.batch_window_ms, (int, float)) and self.batch_window_ms >= 0):
            raise ConfigError(f"batch_window_ms: expected milliseconds >= 0, got {self.batch_window_ms!r}")
        if self.group_size is not None and self.group_wait_s >= self.request_timeout:
            raise ConfigError(f"group_wait_s ({self.group_wait_s} s) must be under request_timeout "
                              f"({self.request_timeout} s), or a short group's requests time out before it is judged")
        if not (isinstance(self.poll_s, (int, float)) and self.poll_s > 0):
            raise ConfigError(f"poll_s: expected seconds > 0, got {self.poll_s!r}")


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


def _labels(data: dict[str, Any], n: int) -> list[Any] | None:
    values = data.get("labels")
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n:
        got = f"{len(values)} items" if isinstance(values, list) else type(values).__name__
        raise _HTTPError(422, f"'labels': expected a list of {n} items (one per query) or null, got {got}")
    return values


def split_queries(queries: Sequence[str], prompts: Sequence[str], strip: Sequence[str] = ()) -> list[str]:
    """Responses from OpenRLHF queries (prompt + response; left-truncated prompts handled).

    >>> split_queries(["Q: hi A: hello</s>"], ["Q: hi A:"], strip=["</s>"])
    ['hello']
    """
    out = []
    for i, (q, p) in enumerate(zip(queries, prompts)):
        try:
            out.append(split_query(q, p, strip)[0])
        except InputError as e:
            raise InputError(f"item {i}: {e}", index=i, field="query") from e
    return out


def _authorized(request: Request, token: str) -> bool:
    want = token.encode()
    given_query = request.query_params.get("token")
    if given_query is not None and hmac.compare_digest(given_query.encode(), want):
        return True
    given = request.headers.get("authorization", "")
    return hmac.compare_digest(given.encode(), b"Bearer " + want)


def create_app(reward: Any, *, failure_reward: Any, **options: Any) -> Starlette:
    """The ASGI app: ``POST /`` (alias ``/get_reward``), ``GET /health``, ``GET /stats``.

    Args:
        reward: a ``PrometheusReward`` (its config decides mode, rubric, normalisation).
        failure_reward: the reward sent for a failed sample, a number or ``"min"``; required.
        options: the other ``ServerConfig`` fields (token, batch_window_ms, request_timeout ...).
    """
    cfg = ServerConfig(failure_reward=failure_reward, **options)
    batched = BatchedReward(reward, max_wait_s=cfg.batch_window_ms / 1000, max_batch_size=cfg.max_batch_size,
                            group_size=cfg.group_size, group_wait_s=cfg.group_wait_s)
    keys = batched.extra_log_keys
    counters = {"requests": 0, "samples": 0, "judge_failures": 0, "input_failures": 0, "deadline_failures": 0,
                "disconnected": 0, "rejected": 0, "backend_errors": 0, "truncated_prompts": 0}

    async def judge(request: Request, jobs: list[Any]) -> list[JobResult] | None:
        """The jobs' results; None when the client went away (its samples were dropped)."""
        deadline = time.monotonic() + cfg.request_timeout
        task = asyncio.ensure_future(batched.ascore(jobs, timeout=cfg.request_timeout))
        while True:
            left = deadline - time.monotonic()
            done, _ = await asyncio.wait({task}, timeout=max(min(cfg.poll_s, left), 0))
            if done:
                try:
                    return task.result()
                except DeadlineExceeded as e:
                    reason = str(e)
                break
            if await request.is_disconnected():
                task.cancel()
                counters["disconnected"] += 1
                logger.info("client disconnected; its %d queued sample(s) were dropped", len(jobs))
                return None
            if left <= 0:
                task.cancel()
                reason = (f"no answer within the request deadline of {cfg.request_timeout:.0f} s (the judge is slower "
                          "than the rollouts arrive: add judge replicas or lower the rollout batch)")
                break
        counters["deadline_failures"] += len(jobs)
        logger.warning("%d sample(s) failed on the deadline: %s", len(jobs), reason)
        return [unjudged(reason, keys) for _ in jobs]

    async def get_reward(request: Request) -> Response:
        try:
            if cfg.token is not None and not _authorized(request, cfg.token):
                raise _HTTPError(401, "missing or wrong token (send '?token=<token>' in the URL or "
                                      "'Authorization: Bearer <token>')")
            body = await _read_body(request, cfg.max_body_bytes)
            try:
                data = json.loads(body)
            except ValueError as e:
                raise _HTTPError(400, f"malformed JSON: {e}") from None
            if not isinstance(data, dict):
                raise _HTTPError(422, f"expected a JSON object with 'query' and 'prompts', got {type(data).__name__}")
            queries = _string_list(data, "query", None)
            prompts = _string_list(data, "prompts", len(queries))
            labels = _labels(data, len(queries))
            counters["requests"] += 1
            counters["samples"] += len(queries)
            jobs, reasons, truncated = make_jobs(queries, prompts, labels, cfg.strip)
            counters["truncated_prompts"] += truncated
            drop_invalid(batched, jobs, reasons)
            live = [j for j in jobs if j is not None]
            judged = await judge(request, live) if live else []
            if judged is None:
                return Response(status_code=499)
        except _HTTPError as e:
            counters["rejected"] += 1
            logger.warning("rejected a request with %d: %s", e.status, e)
            return JSONResponse({"error": str(e)}, status_code=e.status)
        except BackendError as e:
            counters["backend_errors"] += 1
            logger.error("judge backend failed: %s", e)
            return JSONResponse({"error": f"judge backend failed: {e}"}, status_code=503)
        except PromRewardError as e:
            logger.error("reward request failed: %s", e)
            return JSONResponse({"error": str(e)}, status_code=500)
        it = iter(judged)
        results = [next(it) if job is not None else unjudged(reason or "", keys) for job, reason in zip(jobs, reasons)]
        counters["input_failures"] += len(jobs) - len(live)
        reply = reward_dict(results, cfg.failure_reward, reward.config, keys)
        if reply["judge_failures"]:
            counters["judge_failures"] += reply["judge_failures"]
            first = next(r for r in reply["failure_reasons"] if r)
            logger.warning("%d of %d sample(s) failed and got reward %s (first reason: %s)", reply["judge_failures"],
                           len(results), reply["rewards"][reply["failure_reasons"].index(first)], first)
        return JSONResponse(reply)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "judge_failures": counters["judge_failures"]})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({"batcher": batched.stats.as_dict(), **counters, "extra_log_keys": list(keys),
                             "failure_reward": cfg.failure_reward.value})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        batched.close()

    app = Starlette(routes=[
        Route("/", get_reward, methods=["POST"]),
        Route("/get_reward", get_reward, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
    ], lifespan=lifespan)
    app.state.batched = batched
    app.state.counters = counters
    app.state.config = cfg
    return app


def serve_reward(reward: Any, host: str = "127.0.0.1", port: int = 5000, *, failure_reward: Any,
                 token: str | None = None, **options: Any) -> None:
    """Serve ``create_app(reward, ...)`` with uvicorn until interrupted (127.0.0.1 unless told)."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1") and token is None:
        logger.warning("serving the reward on %s without a token: anyone who can reach it can use the judge", host)
    uvicorn.run(create_app(reward, failure_reward=failure_reward, token=token, **options), host=host, port=port,
                log_level="info")
