"""Small real HTTP servers on 127.0.0.1 that play an OpenAI-compatible judge server, misbehaving on
purpose (5xx, garbage, hangs). Shared by the backend, store and failover tests through the
``fake_server`` fixture in conftest.py; ``free_port`` for every test that binds a port.
``StandInJudge`` plays a whole Prometheus judge server (models, chat completions, tokenize) that
grades by the response's first word and can be down, hung or late on purpose (the reward-path
fault tests)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from http import server as http_server
from http.server import BaseHTTPRequestHandler
from typing import Any

from prom_reward.backends.scripted import ScriptedBackend
from tests.judge_answers import PROMETHEUS, Read, answer, read_prompt


class ThreadingHTTPServer(http_server.ThreadingHTTPServer):
    """The standard library's, with a listen backlog for a judge client's many concurrent connections: at its
    default of 5, connections past it wait for the kernel's SYN retransmit (1 s) before they are accepted."""

    request_queue_size = 128


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Reply = Callable[[int, dict], "tuple[int, Any] | None"]  # (call number, JSON body) -> reply; None hangs


def chat_reply(n: int = 1, text: str = "Good. [RESULT] 4") -> dict:
    return {
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": f"{text} #{i}"}, "finish_reason": "stop"}
            for i in reversed(range(n))
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3 * n},
    }


class FakeServer:
    """A real HTTP server on 127.0.0.1 in a thread; ``routes`` maps a path to a reply function. With
    ``keep_alive`` it speaks HTTP/1.1 and keeps connections open; ``peers`` lists each call's client port."""

    def __init__(self, routes: dict[str, Reply], port: int = 0, *, keep_alive: bool = False) -> None:
        self.routes, self.calls, self.peers = routes, [], []
        self.request = threading.local()
        """The call being answered, in the thread answering it: ``headers``, read by a reply function."""
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.calls.append((self.path, body))
                outer.peers.append(self.client_address[1])
                outer.request.headers = self.headers
                route = outer.routes.get(self.path)
                reply = (
                    (404, {"detail": "Not Found"})
                    if route is None
                    else route(sum(p == self.path for p, _ in outer.calls), body)
                )
                if reply is None:  # hang until the test ends
                    outer.release.wait(30)
                    return
                status, payload = reply
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def bodies(self, path: str) -> list[dict]:
        return [b for p, b in self.calls if p == path]

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class StandInJudge:
    """A stand-in Prometheus judge server on 127.0.0.1 (``GET /v1/models``, ``POST /v1/chat/completions``,
        ``POST /tokenize``): it grades an absolute prompt by the first word of the response (``grades``,
        else ``default``), answers a pairwise prompt with the response whose first word grades higher (A on
        a tie, so the two orders disagree), and misbehaves on purpose:

        - ``down_for``: answers 503 to everything for that many seconds after ``start()`` (``None``: always);
        - ``hang_first``: the first ``hang_first`` chat calls never answer;
        - ``late``: ``start(late=s)`` binds the port only ``s`` seconds later (connection refused until then);
        - ``refuse``: answers every ``/v1`` call with that status (404: a wrong route, 401: refused credentials);
        - a chat request for another model than ``model`` is answered 404 "does not exist", as vLLM does;
        - ``api_key``: every ``/v1`` call without ``Authorization: Bearer <api_key>`` is answered 401;

    It reads every registered format's prompts and answers in that format's own output (``tests.judge_answers``:
    e.g. Flow-Judge's ``<feedback>...</feedback><score>N</score>``, Selene's ``**Result:** B``), its grades mapped
    onto the format's scale. ``answer(user message)``, when given, answers first (None: read as above).

        ``max_model_len`` is reported by ``/v1/models``; ``/tokenize`` counts a token per 3 characters.
    """

    def __init__(
        self,
        grades: dict[str, int] | None = None,
        *,
        default: int = 3,
        down_for: float | None = 0.0,
        hang_first: int = 0,
        max_model_len: int = 4096,
        model: str = "stand-in-judge",
        refuse: int | None = None,
        api_key: str | None = None,
        answer: Callable[[str], str | None] | None = None,
    ) -> None:
        self.grades, self.default, self.down_for, self.hang_first = dict(grades or {}), default, down_for, hang_first
        self.max_model_len, self.model, self.refuse = max_model_len, model, refuse
        self.api_key = api_key
        self.answer = answer
        self.keys: list[str | None] = []
        """The ``Authorization`` header of every ``/v1`` call, in order of arrival."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server: FakeServer | None = None
        self.started = 0.0
        self.chats = 0
        self.hung = 0
        self.graded: list[str] = []
        self.prompts: list[str] = []
        """The user message of every chat it answered, in order of arrival."""
        self._lock = threading.Lock()

    def _down(self) -> bool:
        return self.down_for is None or time.monotonic() - self.started < self.down_for

    def _refused(self) -> tuple[int, Any]:
        return (self.refuse or 404), {"detail": "Not Found"} if self.refuse == 404 else {"error": "Unauthorized"}

    def _unauthorized(self) -> bool:
        """Record the call's key; True when ``api_key`` is set and the call did not bring it."""
        assert self.server is not None
        got = self.server.request.headers.get("Authorization")
        with self._lock:
            self.keys.append(got)
        return self.api_key is not None and got != f"Bearer {self.api_key}"

    def _models(self, n: int, body: dict) -> tuple[int, Any]:
        if self._unauthorized():
            return 401, {"error": "Unauthorized"}
        if self.refuse:
            return self._refused()
        if self._down():
            return 503, {"error": "judge restarting"}
        return 200, {"data": [{"id": self.model, "max_model_len": self.max_model_len}]}

    def _tokenize(self, n: int, body: dict) -> tuple[int, Any]:
        if self._down():
            return 503, {"error": "judge restarting"}
        text = json.dumps(body.get("messages") or body.get("prompt"))
        return 200, {"count": len(text) // 3, "tokens": []}

    def _chat(self, n: int, body: dict) -> tuple[int, Any] | None:
        with self._lock:
            self.chats += 1
            if self.hung < self.hang_first:
                self.hung += 1
                return None
        if self._unauthorized():
            return 401, {"error": "Unauthorized"}
        if self.refuse:
            return self._refused()
        if self._down():
            return 503, {"error": "judge restarting"}
        if body.get("model") != self.model:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}}
        user = body["messages"][-1]["content"]
        system = "".join(m["content"] for m in body["messages"][:-1] if m.get("role") == "system")
        with self._lock:
            self.prompts.append(user)
        text = self._answered(user)
        if text is None:
            read = read_prompt(system, user) or Read("prometheus2", "absolute", ("",), PROMETHEUS)
            with self._lock:
                self.graded.extend(read.texts)
            text = answer(read, tuple(self._grade(t) for t in read.texts))
        n = int(body.get("n") or 1)
        return 200, {
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i in range(n)
            ],
            "usage": {"prompt_tokens": len(user) // 3, "completion_tokens": 9 * n},
        }

    def _answered(self, user: str) -> str | None:
        """The ``answer`` hook's output for a prompt in a judge format this stand-in does not read (None: none)."""
        return None if self.answer is None else self.answer(user)

    def _grade(self, response: str) -> int:
        words = response.split()
        return self.grades.get(words[0], self.default) if words else self.default

    def start(self, late: float = 0.0) -> StandInJudge:
        """Serve (after ``late`` seconds, from a thread, when given); the down clock starts now."""
        self.started = time.monotonic()

        def serve() -> None:
            time.sleep(late)
            self.server = FakeServer(
                {"/v1/models": self._models, "/v1/chat/completions": self._chat, "/tokenize": self._tokenize},
                port=self.port,
            )

        if late:
            threading.Thread(target=serve, daemon=True).start()
        else:
            serve()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class BlockingScripted(ScriptedBackend):
    """A scripted backend that blocks as an in-process engine does: ``generate`` (a ``respond`` that waits or
    sleeps) runs in a worker thread of the backend, so the caller's loop goes on meanwhile."""

    async def agenerate(self, requests, **options):
        return await asyncio.to_thread(self.generate, requests, **options)
