"""A no-op OpenAI-compatible judge server for client benchmarks: answers at once, generates nothing.

It speaks the parts of vLLM's API that ``prom_reward``'s ``openai`` backend uses
(``/v1/chat/completions``, ``/v1/completions``, ``/v1/models`` with ``max_model_len``,
``/tokenize``, ``/health``) and replies with a fixed judge output, so whatever rate a
client reaches against it is the client's own ceiling. Starlette on uvicorn (httptools),
one process; pin it to its own core (``--cpu``) so it does not share the client's.

Example:
    $ python -m benchmarks.noop_server --port 8199 --cpu 1
    >>> app = create_app()
    >>> sorted(r.path for r in app.routes)
    ['/health', '/tokenize', '/v1/chat/completions', '/v1/completions', '/v1/models']
"""

from __future__ import annotations

import argparse
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

OUTPUT = "The response is accurate and complete. [RESULT] 4"
MODEL = "noop-judge"


def _usage(n: int) -> dict[str, int]:
    return {"prompt_tokens": 512, "completion_tokens": 12 * n, "total_tokens": 512 + 12 * n}


async def chat(request: Request) -> JSONResponse:
    body = await request.json()
    n = int(body.get("n") or 1)
    return JSONResponse(
        {
            "id": "noop",
            "object": "chat.completion",
            "model": MODEL,
            "usage": _usage(n),
            "choices": [
                {"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": OUTPUT}}
                for i in range(n)
            ],
        }
    )


async def completions(request: Request) -> JSONResponse:
    body = await request.json()
    n = int(body.get("n") or 1)
    return JSONResponse(
        {
            "id": "noop",
            "object": "text_completion",
            "model": MODEL,
            "usage": _usage(n),
            "choices": [{"index": i, "finish_reason": "stop", "text": OUTPUT} for i in range(n)],
        }
    )


async def models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 8192}]})


async def tokenize(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"count": 512, "max_model_len": 8192, "tokens": [1] * 512})


async def health(request: Request) -> Response:
    return Response(status_code=200)


def create_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/health", health),
        ]
    )


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8199)
    p.add_argument("--cpu", type=int, help="pin the server to this CPU core")
    args = p.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    uvicorn.run(
        create_app(),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        http="httptools",
        loop="uvloop",
    )


if __name__ == "__main__":
    main()
