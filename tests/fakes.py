"""Small real HTTP servers on 127.0.0.1 that play an OpenAI-compatible judge server, misbehaving on
purpose (5xx, garbage, hangs). Shared by the backend, store and failover tests through the
``fake_server`` fixture in conftest.py; ``free_port`` for every test that binds a port."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Reply = Callable[[int, dict], "tuple[int, Any] | None"]  # (call number, JSON body) -> reply; None hangs


def chat_reply(n: int = 1, text: str = "Good. [RESULT] 4") -> dict:
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": f"{text} #{i}"},
                         "finish_reason": "stop"} for i in reversed(range(n))],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3 * n}}


class FakeServer:
    """A real HTTP server on 127.0.0.1 in a thread; ``routes`` maps a path to a reply function."""

    def __init__(self, routes: dict[str, Reply]) -> None:
        self.routes, self.calls = routes, []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.calls.append((self.path, body))
                route = outer.routes.get(self.path)
                reply = (404, {"detail": "Not Found"}) if route is None else route(
                    sum(p == self.path for p, _ in outer.calls), body)
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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
