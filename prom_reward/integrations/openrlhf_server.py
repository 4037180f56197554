"""The HTTP reward endpoint for OpenRLHF's remote reward model (``--reward.remote_url http://...``): requests'
samples judged in batches, with ``/health`` (``ServerHealth``, the worst signal winning: ``failing``, a misconfigured
judge; ``degraded``, the judge failing now or too many recent samples failed; ``ok``) and ``/stats``; replies, status
codes and auth are in docs/openrlhf.md."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prom_reward.errors import InputError, JudgeConfigError, JudgeUnavailableError, PromRewardError
from prom_reward.integrations.batched_reward import SampleOutcome
from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.integrations.openrlhf_func import make_samples, reward_dict
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.outage import JudgeHealth

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
SHUTDOWN_GRACE_S = 5
"""Seconds a SIGTERM / Ctrl-C waits for requests in flight before they are cut."""
MAX_JSON_DEPTH = 32
"""Nesting levels a request body may have (OpenRLHF's bodies have 3, a rubric label 4)."""
NAMES = ("'query'", "'prompts'", "'labels'")
"""The request's lists, as its errors name them."""
FAILURE_WINDOW = 100
"""The recent samples the failure share is taken over."""
MIN_SAMPLES = 10
"""Samples needed before the failure share can turn ``/health`` degraded."""
logger = logging.getLogger(__name__)
_TOKEN = re.compile(r"((?:^|[?&\s])token=)[^&\s]*", re.IGNORECASE)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "SHUTDOWN_GRACE_S", "ServerHealth", "create_app", "redact", "serve_reward"]


def redact(text: str) -> str:
    """``text`` with every ``token=...`` query value replaced by ``***``."""
    return _TOKEN.sub(lambda m: m.group(1) + "***", text)


class RedactTokens(logging.Filter):
    """A logging filter that redacts ``token=`` query values from a record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


class ServerHealth:
    """The judge's ``JudgeHealth``, a configuration failure, and the recent failure share."""

    def __init__(self, judge: JudgeHealth, degraded_failure_share: float) -> None:
        self.judge = judge
        self.threshold = degraded_failure_share
        self.config_error: str | None = None
        self._recent: deque[bool] = deque(maxlen=FAILURE_WINDOW)
        self._lock = threading.Lock()

    def record(self, failed: Iterable[bool]) -> None:
        """Record answered samples (True: it failed)."""
        with self._lock:
            self._recent.extend(bool(f) for f in failed)

    def misconfigured(self, cause: str) -> None:
        """``/health`` says failing with ``cause`` from now on."""
        self.config_error = cause

    def status(self) -> dict[str, Any]:
        """``JudgeHealth.status()`` plus ``recent_failure_share``; status ``failing``, ``degraded`` or ``ok``."""
        out = self.judge.status()
        with self._lock:
            n = len(self._recent)
            share = sum(self._recent) / n if n >= MIN_SAMPLES else None
        out["recent_failure_share"] = None if share is None else round(share, 3)
        if self.config_error is not None:
            out.update(status="failing", cause=self.config_error)
        elif out["status"] == "ok" and share is not None and share > self.threshold:
            out.update(
                status="degraded",
                cause=f"{share:.0%} of the last {len(self._recent)} samples failed (over degraded_failure_share "
                f"{self.threshold:g}): see failure_reasons in the replies and the server log",
            )
        return out


class _Reply(JSONResponse):
    """Starlette's JSON reply, with a lone surrogate a client sent (in a failure reason) escaped, not a 500."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise HTTPException(400, f"bad Content-Length header {declared!r}") from None
        if size > limit:
            raise HTTPException(413, f"body of {size} bytes is over the limit of {limit} bytes")
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise HTTPException(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _too_deep(data: Any, limit: int) -> bool:
    """Whether ``data`` nests more than ``limit`` levels (checked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(value, (dict, list)):
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def _parse(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except RecursionError:
        raise HTTPException(400, f"JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as e:
        raise HTTPException(400, f"malformed JSON: {e}") from None
    if _too_deep(data, MAX_JSON_DEPTH):
        raise HTTPException(400, f"JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    return data


def _authorized(request: Request, token: str) -> bool:
    query = request.query_params.get("token")
    if query is not None and hmac.compare_digest(query.encode(), token.encode()):
        return True
    return hmac.compare_digest(request.headers.get("authorization", "").encode(), f"Bearer {token}".encode())


def create_app(
    reward: Any,
    settings: RewardSettings,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    poll_s: float = 0.1,
    health: ServerHealth | None = None,
) -> Starlette:
    """The ASGI app of ``reward`` (a ``PrometheusReward``): ``POST /`` (alias ``/get_reward``), ``GET /health``,
    ``GET /stats``. ``token``: required of requests (``?token=`` or ``Authorization: Bearer``); larger bodies than
    ``max_body_bytes`` get 413; a waiting request checks its client every ``poll_s``."""
    cfg = settings  # the batching, deadline and failure-reward settings
    batched = cfg.batched(reward)
    keys = batched.extra_log_keys
    health = health or ServerHealth(reward.health, cfg.degraded_failure_share)
    names = "requests samples judge_failures input_failures deadline_failures disconnected rejected judge_unavailable"
    counters = dict.fromkeys([*names.split(), "truncated_prompts"], 0)

    async def judge(request: Request, samples: list[Any]) -> list[SampleOutcome] | None:
        """The samples' results; None when the client went away (its samples were dropped)."""
        deadline = time.monotonic() + cfg.request_timeout
        task = asyncio.ensure_future(batched.ascore(samples, timeout=cfg.request_timeout))
        while True:
            left = deadline - time.monotonic()
            try:
                done, _ = await asyncio.wait({task}, timeout=max(min(poll_s, left), 0))
                gone = not done and await request.is_disconnected()
            except asyncio.CancelledError:  # the server is shutting down past its grace: drop the samples, answer
                task.cancel()
                raise HTTPException(
                    503, f"the reward server is shutting down; the request's {len(samples)} sample(s) were not judged"
                ) from None
            if done:
                try:
                    return task.result()
                except DeadlineExceeded as e:
                    reason = str(e)
                break
            if gone:
                task.cancel()
                counters["disconnected"] += 1
                logger.info("client disconnected; its %d queued sample(s) were dropped", len(samples))
                return None
            if left <= 0:
                task.cancel()
                reason = (
                    f"no answer within the request deadline of {cfg.request_timeout:.0f} s (the judge is slower "
                    "than the rollouts arrive, or failing: see /health; add judge replicas or lower the rollout "
                    "batch)"
                )
                break
        counters["deadline_failures"] += len(samples)
        logger.warning("%d sample(s) failed on the deadline: %s", len(samples), reason)
        return [batched.unjudged(reason) for _ in samples]

    async def get_reward(request: Request) -> Response:
        try:
            if token is not None and not _authorized(request, token):
                raise HTTPException(
                    401, "missing or wrong token (send '?token=<token>' in the URL or 'Authorization: Bearer <token>')"
                )
            data = _parse(await _read_body(request, max_body_bytes))
            if not isinstance(data, dict):
                raise HTTPException(
                    422, f"expected a JSON object with 'query' and 'prompts', got {type(data).__name__}"
                )
            try:
                queries, prompts, labels = (data.get(key) for key in ("query", "prompts", "labels"))
                samples, reasons, truncated = make_samples(queries, prompts, labels, cfg.strip, cfg.reward, NAMES, True)
            except InputError as e:
                raise HTTPException(422, str(e)) from None
            counters["requests"] += 1
            counters["samples"] += len(samples)
            counters["truncated_prompts"] += truncated
            live = [x for x in samples if x is not None]
            judged = await judge(request, live) if live else []
            if judged is None:
                return Response(status_code=499)
        except ClientDisconnect:  # gone before its whole body arrived (shorter than its Content-Length)
            counters["disconnected"] += 1
            logger.info("client disconnected before its request body arrived")
            return Response(status_code=499)
        except HTTPException as e:
            counters["rejected"] += 1
            logger.warning("rejected a request with %d: %s", e.status_code, e.detail)
            return _Reply({"error": e.detail}, status_code=e.status_code)
        except JudgeConfigError as e:  # the configuration's fault, not a sample's: never a failure reward
            health.misconfigured(str(e))
            logger.error("the judge is misconfigured; answering 500 and /health failing: %s", e)
            return _Reply({"error": f"judge misconfigured: {e}"}, status_code=500)
        except JudgeUnavailableError as e:  # outage_on_exhausted=raise: training stops
            counters["judge_unavailable"] += 1
            logger.error("judge unavailable past the outage budget, answering 503 (outage_on_exhausted=raise): %s", e)
            return _Reply({"error": f"judge unavailable: {e}"}, status_code=503)
        except PromRewardError as e:
            logger.error("reward request failed: %s", e)
            return _Reply({"error": str(e)}, status_code=500)
        counters["input_failures"] += len(samples) - len(live)
        reply = reward_dict(samples, reasons, judged, batched, cfg.failure_reward)
        health.record(reason is not None for reason in reply["failure_reasons"])
        counters["judge_failures"] += reply["judge_failures"]
        return _Reply(reply)

    async def health_route(request: Request) -> Response:
        status = health.status()
        code = 503 if status["status"] == "failing" else 200
        return _Reply({**status, "judge_failures": counters["judge_failures"]}, status_code=code)

    async def stats(request: Request) -> Response:
        return _Reply(
            {
                "batcher": batched.stats.as_dict(),
                **counters,
                "extra_log_keys": list(keys),
                "failure_reward": cfg.failure_reward.value,
                "health": health.status(),
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        yield
        batched.close()

    return Starlette(
        routes=[
            Route("/", get_reward, methods=["POST"]),
            Route("/get_reward", get_reward, methods=["POST"]),
            Route("/health", health_route, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def serve_reward(
    reward: Any,
    settings: RewardSettings,
    host: str = "127.0.0.1",
    port: int = 5000,
    *,
    token: str | None = None,
    **options: Any,
) -> None:
    """Serve ``create_app(reward, settings, token=..., **options)`` with uvicorn until SIGTERM or Ctrl-C (then
    within ``SHUTDOWN_GRACE_S``), ``token=`` values redacted from its access log."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1") and token is None:
        logger.warning("serving the reward on %s without a token: anyone who can reach it can use the judge", host)
    uvicorn.run(
        create_app(reward, settings, token=token, **options),
        host=host,
        port=port,
        log_level="info",
        log_config=log_config(),
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with ``RedactTokens`` on its handlers (the access log shows URLs)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_tokens"] = {"()": f"{__name__}.RedactTokens"}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact_tokens")
    return config
