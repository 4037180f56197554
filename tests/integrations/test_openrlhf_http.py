"""The OpenRLHF reward endpoint over real HTTP on 127.0.0.1 (uvicorn in a thread, httpx); OpenRLHF-driven tests
are in test_openrlhf_server.py."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import BackendError, ConfigError
from prom_reward.integrations.openrlhf_server import DEFAULT_MAX_BODY_BYTES, create_app
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import PrometheusReward
from tests.fakes import free_port


@contextlib.contextmanager
def running(app):
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start in 20 s"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        assert not thread.is_alive(), "uvicorn did not stop in 20 s"


def server_app(reward, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, **settings):
    """``create_app`` with the settings around ``reward`` (``RewardSettings.around(reward.config, settings)``)."""
    return create_app(
        reward, RewardSettings.around(reward.config, settings, env={}), token=token, max_body_bytes=max_body_bytes
    )


def scripted_reward(table: dict[str, str], seen: list[GenerationRequest] | None = None, **options):
    """A reward whose judge answers by the response text (no verdict for unknown responses)."""

    def respond(req: GenerationRequest, i: int) -> str:
        if seen is not None:
            seen.append(req)
        for key, out in table.items():
            if f"###Response to evaluate:\n{key}\n" in req.user:
                return out
        return "no verdict here"

    return PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0), **options)


BODY = {
    "query": ["<s>Q: 2+2?\nA: 4</s>", "<s>Q: 2+2?\nA: five</s>", "<s>Q: sky?\nA: ???</s>"],
    "prompts": ["<s>Q: 2+2?\nA:", "<s>Q: 2+2?\nA:", "<s>Q: sky?\nA:"],
    "labels": ["4", "4", None],
}


@pytest.fixture(scope="module")
def server():
    seen: list[GenerationRequest] = []
    reward = scripted_reward({"4": "Right. [RESULT] 5", "five": "Wrong. [RESULT] 1"}, seen)
    with running(
        server_app(reward, strip=["</s>"], failure_reward=-1.0, max_body_bytes=4096, batch_window_ms=100)
    ) as url:
        yield url, seen


def test_rewards_split_queries_and_labels_as_references(server):
    url, seen = server
    seen.clear()
    r = httpx.post(url + "/", json=BODY, timeout=30)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [5.0, 1.0, -1.0] and out["scores"] == out["rewards"]
    assert out["judge_failures"] == 1
    assert out["extra_logs"]["judge_failed"] == [0.0, 0.0, 1.0]
    assert out["extra_logs"]["abstain_rate"] == [pytest.approx(1 / 3)] * 3
    assert all(len(v) == 3 for v in out["extra_logs"].values())
    assert out["failure_reasons"][:2] == [None, None] and "no verdict in" in out["failure_reasons"][2]
    users = {req.user.split("###Response to evaluate:\n")[1].split("\n")[0]: req.user for req in seen}
    assert set(users) == {"4", "five", "???"}
    # the prompt's own <s> is neutralised like any special token in text shown to the judge
    assert "###The instruction to evaluate:\n\uff1cs\uff1eQ: 2+2?\nA:" in users["4"]
    assert "###Reference Answer (Score 5):\n4\n" in users["five"]
    assert "###Reference Answer" not in users["???"]


def test_alias_health_and_empty_batch(server):
    url, _ = server
    assert httpx.get(url + "/health", timeout=10).json()["status"] == "ok"
    r = httpx.post(url + "/get_reward", json={"query": [], "prompts": []}, timeout=10)
    assert r.status_code == 200 and r.json()["rewards"] == []


@pytest.mark.parametrize(
    "body, status, words",
    [
        (b"{not json", 400, "malformed JSON"),
        (b"[1, 2]", 422, "JSON object"),
        (b'{"prompts": []}', 422, "'query'"),
        (b'{"query": ["a"], "prompts": ["a", "b"]}', 422, "expected 1 items"),
        (b'{"query": ["a", 3], "prompts": ["a", "b"]}', 422, "'query'[1]"),
        (b'{"query": ["ab"], "prompts": ["a"], "labels": ["x", "y"]}', 422, "'labels'"),
        (b'{"query": ["ab"], "prompts": ["a"], "labels": [' + b"[" * 40 + b"]" * 40 + b"]}", 400, "nested too deeply"),
    ],
)
def test_bad_requests_get_4xx_with_a_message(server, body, status, words):
    url, _ = server
    r = httpx.post(url + "/", content=body, headers={"content-type": "application/json"}, timeout=10)
    assert r.status_code == status and words in r.json()["error"], r.text


def test_unusable_samples_fail_alone_with_the_same_log_keys(server):
    url, _ = server
    body = {
        "query": ["<s>Q: 2+2?\nA: 4</s>", "zz", "<s>Q: 2+2?\nA: 4</s>", "<s>Q: 2+2?\nA: 4</s>", "<s>Q: 2+2?\nA: 4</s>"],
        "prompts": ["<s>Q: 2+2?\nA:"] * 5,
        # the last: a reason holding a lone surrogate (the criterion's key) is sent escaped, never a 500 for all
        "labels": [{"reference_answer": "4", "rubric": "helpfulness"}, None, {"answer": "4"}, [{"x": 1}]]
        + [{"checklist": [{"\ud800": 1}]}],
    }
    r = httpx.post(url + "/", content=json.dumps(body), headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [5.0, -1.0, -1.0, -1.0, -1.0] and out["judge_failures"] == 4
    reasons = out["failure_reasons"]
    assert "sample 1: the query does not start with its prompt" in reasons[1]
    assert "reference_answer, rubric, instruction" in reasons[2] and "['answer']" in reasons[2]
    assert "strings or numbers" in reasons[3] and "unknown key(s) \ud800" in reasons[4]
    ok = httpx.post(
        url + "/", json={"query": ["<s>Q: 2+2?\nA: 4</s>"], "prompts": ["<s>Q: 2+2?\nA:"]}, timeout=30
    ).json()
    assert set(ok["extra_logs"]) == set(out["extra_logs"]) and all(len(v) == 5 for v in out["extra_logs"].values())


def test_json_deeper_than_the_recursion_limit_is_a_400_not_a_traceback():
    with running(server_app(scripted_reward({}), failure_reward=0)) as url:
        r = httpx.post(url + "/", content=b"[" * 100_000 + b"]" * 100_000, timeout=30)
        assert r.status_code == 400 and "nested too deeply" in r.json()["error"]
        assert httpx.get(url + "/health", timeout=10).json()["status"] == "ok"


def test_non_finite_labels_fail_their_sample_alone(server):
    url, seen = server
    seen.clear()
    body = {
        "query": ["<s>Q: 2+2?\nA: 4</s>"] * 3,
        "prompts": ["<s>Q: 2+2?\nA:"] * 3,
        "labels": [float("nan"), [4, float("inf")], 4.0],
    }
    r = httpx.post(url + "/", content=json.dumps(body), headers={"content-type": "application/json"}, timeout=30)
    out = r.json()
    assert r.status_code == 200 and out["rewards"] == [-1.0, -1.0, 5.0]
    assert all("not a finite number" in reason for reason in out["failure_reasons"][:2])
    assert (
        len(seen) == 1
    )  # only the finite label reached the judge and "###Reference Answer (Score 5):\n4.0\n" in seen[0].user


def test_max_batch_size_holds_inside_one_request():
    sizes: list[int] = []

    class Counting(ScriptedBackend):
        def generate(self, requests, **kw):
            sizes.append(len(requests))
            return super().generate(requests, **kw)

    reward = PrometheusReward(PrometheusJudge(backend=Counting(respond=lambda req, i: "[RESULT] 3")))
    body = {"query": [f"P answer {k}" for k in range(50)], "prompts": ["P"] * 50}
    with running(server_app(reward, failure_reward=0, max_batch_size=16, batch_window_ms=0)) as url:
        r = httpx.post(url + "/", json=body, timeout=30)
        stats = httpx.get(url + "/stats", timeout=10).json()["batcher"]
    assert r.status_code == 200 and r.json()["rewards"] == [3.0] * 50
    assert max(sizes) <= 16 and sum(sizes) == 50 and stats["split_requests"] == 1 and stats["max_batch"] <= 16


def test_failure_reward_is_required():
    with pytest.raises(TypeError, match="settings"):
        create_app(scripted_reward({}))
    with pytest.raises(ConfigError, match="not set"):
        create_app(scripted_reward({}), RewardSettings())


def test_oversize_body_413_by_header_and_by_stream(server):
    url, _ = server
    big = b'{"query": ["' + b"x" * 5000 + b'"], "prompts": [""]}'
    r = httpx.post(url + "/", content=big, timeout=10)
    assert r.status_code == 413 and "4096" in r.json()["error"]

    def chunks():  # no Content-Length: the limit is enforced while streaming
        for _ in range(10):
            yield b"x" * 1000

    r = httpx.post(url + "/", content=chunks(), timeout=10)
    assert r.status_code == 413 and "over the limit" in r.json()["error"]


def test_a_client_gone_before_its_whole_body_arrived_is_counted_not_a_traceback(server):
    """A body shorter than its Content-Length, then the client closes: dropped as ``disconnected`` (not an
    unhandled ``ClientDisconnect`` in the ASGI app); the server keeps answering."""
    url, _ = server
    before = httpx.get(url + "/stats", timeout=10).json()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 999\r\n\r\n" + b'{"query": [')
        conn.shutdown(socket.SHUT_WR)
        assert conn.recv(100) == b""  # closed without an answer
    deadline = time.monotonic() + 10
    while (after := httpx.get(url + "/stats", timeout=10).json())["disconnected"] == before["disconnected"]:
        assert time.monotonic() < deadline, after
        time.sleep(0.05)
    assert after["disconnected"] == before["disconnected"] + 1 and after["rejected"] == before["rejected"]
    assert httpx.post(url + "/", json=BODY, timeout=30).status_code == 200


def test_a_megabyte_prompt_its_query_does_not_match_fails_alone_without_stalling_the_server():
    """The search for a left-truncated prompt's suffix looks only where the query's first characters occur: a
    scan of every cut copied the prompt once per character (15 s for 1 MB here, blocking every request)."""
    prompt = ("word " * 200_000)[:1_000_000]
    body = {"query": ["X" + prompt + " good", "Q: ok"], "prompts": [prompt, "Q:"]}
    with running(server_app(scripted_reward({"ok": "[RESULT] 3"}), failure_reward=0)) as url:
        start = time.monotonic()
        r = httpx.post(url + "/", json=body, timeout=60)
        took = time.monotonic() - start
    assert r.status_code == 200 and r.json()["rewards"] == [0.0, 3.0] and took < 5, (r.text[:200], took)
    assert "does not start with its prompt" in r.json()["failure_reasons"][0]


def test_a_response_ending_in_600k_end_of_text_strings_is_stripped_in_linear_time():
    """A degenerate rollout (7.8 MB of ``<|endoftext|>``): stripping copied the response once per string (a minute)."""
    body = {"query": ["Q: ok" + "<|endoftext|>" * 600_000], "prompts": ["Q:"]}
    app = server_app(scripted_reward({"ok": "[RESULT] 3"}), failure_reward=0, strip=["<|im_end|>", "<|endoftext|>"])
    with running(app) as url:
        start = time.monotonic()
        r = httpx.post(url + "/", json=body, timeout=120)
        took = time.monotonic() - start
    assert r.status_code == 200 and r.json()["rewards"] == [3.0] and took < 10, (r.text[:200], took)


def test_bearer_token():
    reward = scripted_reward({"ok": "[RESULT] 3"})
    body = {"query": ["P ok"], "prompts": ["P"]}
    with running(server_app(reward, token="s3cret", failure_reward=0)) as url:
        assert httpx.post(url + "/", json=body, timeout=10).status_code == 401
        r = httpx.post(url + "/", json=body, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert r.status_code == 401 and "Bearer <token>" in r.json()["error"]
        r = httpx.post(url + "/", json=body, headers={"Authorization": "Bearer s3cret"}, timeout=10)
        assert r.status_code == 200 and r.json()["rewards"] == [3.0]


@pytest.mark.parametrize("on_exhausted, status", [("fail", 200), ("raise", 503)])
def test_judge_down_past_the_budget_fails_the_samples_or_503_when_asked(on_exhausted, status):
    def respond(req, i):
        raise BackendError("judge server unreachable")

    outage = OutagePolicy(budget_s=0.3, backoff_s=0.05, on_exhausted=on_exhausted)
    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)), outage=outage)
    with running(server_app(reward, failure_reward=0)) as url:
        start = time.monotonic()
        r = httpx.post(url + "/", json={"query": ["P r"], "prompts": ["P"]}, timeout=10)
        took = time.monotonic() - start
        health = httpx.get(url + "/health", timeout=10).json()
    assert r.status_code == status and 0.15 <= took < 5, (r.text, took)  # retried within the 0.3 s budget
    assert health["status"] == "degraded" and "judge server unreachable" in health["cause"]
    if status == 200:
        assert r.json()["rewards"] == [0.0] and "failing for" in r.json()["failure_reasons"][0]
        assert "judge server unreachable" in r.json()["failure_reasons"][0]
    else:
        assert "judge unavailable" in r.json()["error"] and "outage budget" in r.json()["error"]


def test_concurrent_requests_share_judge_batches_one_at_a_time():
    active, peak, sizes = [0], [0], []
    lock = threading.Lock()

    def respond(req, i):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return "[RESULT] 2"

    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)))
    ready = threading.Barrier(4)
    with running(server_app(reward, failure_reward=0, batch_window_ms=500)) as url:

        def post(k: int) -> None:
            with httpx.Client(timeout=30) as client:
                ready.wait(10)  # the four requests leave together (client set-up is slow on a loaded machine)
                r = client.post(url + "/", json={"query": [f"P r{k}"], "prompts": ["P"]})
            sizes.append(r.json()["extra_logs"]["judge_batch_size"][0])
            assert r.json()["rewards"] == [2.0]

        threads = [threading.Thread(target=post, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert peak[0] == 1 and max(sizes) >= 3  # one judge call at a time, each carrying several requests


@pytest.mark.integration
def test_real_vllm_judge_failures_become_failure_reward(vllm_server):
    judge = PrometheusJudge(backend="openai", base_url=vllm_server, sampling={"max_tokens": 4}, max_retries=0)
    reward = PrometheusReward(judge)
    body = {
        "query": ["Q: hi? A: hello", "Q: 1+1? A: 2"],
        "prompts": ["Q: hi? A:", "Q: 1+1? A:"],
        "labels": ["hey", "2"],
    }
    try:
        with running(server_app(reward, failure_reward=0.0)) as url:
            r = httpx.post(url + "/get_reward", json=body, timeout=120)
    finally:
        judge.close()
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [0.0, 0.0] and out["judge_failures"] == 2
    assert out["extra_logs"]["judge_failed"] == [1.0, 1.0]
    assert out["extra_logs"]["judge_completion_tokens"][0] > 0


@pytest.mark.integration
def test_cli_reward_server_end_to_end(vllm_server, tmp_path):
    import subprocess
    import sys

    port = free_port()
    log = open(tmp_path / "reward-server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prom_reward.cli",
            "reward-server",
            "--server",
            vllm_server,
            "--max-tokens",
            "4",
            "--port",
            str(port),
            "--token",
            "t0k",
            "--failure-reward",
            "-2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "reward-server.log").read_text()
            assert time.monotonic() < deadline, "reward-server did not answer /health in 60 s"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        body = {"query": ["Q: hi? A: hello"], "prompts": ["Q: hi? A:"]}
        assert httpx.post(url + "/", json=body, timeout=10).status_code == 401
        r = httpx.post(url + "/", json=body, headers={"Authorization": "Bearer t0k"}, timeout=120)
        assert r.status_code == 200 and r.json()["rewards"] == [-2.0] and r.json()["judge_failures"] == 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
