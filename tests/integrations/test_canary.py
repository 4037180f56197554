"""The configuration canary of the reward server (``rewards.startup``) and its ``/health``
(``integrations.openrlhf_server.ServerHealth``), through the real command and the real app on 127.0.0.1.

A judge that answers but not as configured (404 on the API route: the URL lacks ``/v1``; 401; a model it does
not serve) and a failure reward above the scale stop ``prom-reward reward-server`` before it serves, exit 2 and
the fix; met during a run, the request is answered with the error and ``/health`` says failing, never a
failure reward. ``/health`` turns degraded when the recent share of failed samples passes its threshold.
"""

from __future__ import annotations

import httpx
import pytest

from prom_reward.cli.main import main
from prom_reward.integrations.openrlhf_server import MIN_SAMPLES, ServerHealth, create_app
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.outage import JudgeHealth
from prom_reward.rewards.reward import PrometheusReward
from tests.fakes import StandInJudge, free_port
from tests.integrations.test_openrlhf_http import running, scripted_reward

JUDGE = {"backend": "openai", "system_role": False, "max_retries": 0, "sampling": {"max_tokens": 8}}


def _root(url: str) -> str:
    return url.removesuffix("/v1")


@pytest.mark.parametrize(
    "judge, server, argv, words",
    [
        ({}, _root, [], [r"HTTP 404", "not the server's OpenAI-compatible API", "ends in /v1", "--server"]),
        ({"refuse": 401}, None, [], ["HTTP 401", "PROM_REWARD_API_KEY"]),
        ({"refuse": 404}, None, [], ["HTTP 404", "ends in /v1"]),
        ({}, None, ["--failure-reward", "7"], ["--failure-reward: 7", "above the reward's scale 1..5", "--failure-"]),
        ({}, None, ["--failure-reward", "1.5", "--normalize", "unit"], ["scale 0..1", "at most 1"]),
    ],
    ids=["no-v1", "401", "404", "failure-reward-7", "failure-reward-unit"],
)
def test_reward_server_refuses_a_misconfigured_judge_before_serving(judge, server, argv, words, capsys):
    stand_in = StandInJudge(**judge).start()
    url = server(stand_in.url) if server else stand_in.url
    try:
        code = main(["reward-server", "--server", url, "--failure-reward", "min", "--port", str(free_port()), *argv])
    finally:
        stand_in.stop()
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("prom-reward: error: "), err
    if not argv:
        assert f"judge {url}" in err
    for w in words:
        assert w in err, (w, err)
    assert not stand_in.graded  # nothing was judged


def test_a_model_named_only_in_the_judge_options_is_checked_at_start(capsys):
    """The model named only in the judge options (no ``--model``): ``GET /models`` checks it as it checks
    ``--model`` (the judge's own server spec), before the canary; the error names the setting to fix."""
    stand_in = StandInJudge(model="prometheus").start()
    reward = PrometheusReward({**JUDGE, "base_url": stand_in.url, "model": "other"}, failure_reward="min")
    from prom_reward.errors import JudgeConfigError
    from prom_reward.rewards.startup import check_judge

    try:
        with pytest.raises(JudgeConfigError, match=r"does not serve the model 'other' \(it serves prometheus\)"):
            check_judge(reward.judge_server(), reward=reward, health=reward.health)
    finally:
        stand_in.stop()
    assert not stand_in.graded


@pytest.mark.parametrize("refuse, words", [(404, "ends in /v1"), (401, "PROM_REWARD_API_KEY")])
def test_a_judge_down_at_start_then_found_misconfigured_fails_health(refuse, words, caplog):
    """Down at start: not misconfigured (the server starts, degraded); once it answers, the probe runs the canary,
    and a configuration failure then turns ``/health`` failing."""
    from prom_reward.rewards.startup import check_judge

    late = StandInJudge(refuse=refuse)
    reward = PrometheusReward({**JUDGE, "base_url": late.url}, failure_reward="min")
    health = ServerHealth(reward.health, degraded_failure_share=0.5)
    check = check_judge(
        reward.judge_server(), health=reward.health, reward=reward, timeout=1.0, probe_every=0.2,
        on_misconfigured=health.misconfigured,
    )  # fmt: skip
    assert health.status()["status"] == "degraded" and "not answering" in health.status()["cause"]
    late.start()
    try:
        assert _probed(check, 20)
    finally:
        late.stop()
    status = health.status()
    assert status["status"] == "failing" and words in status["cause"] and f"judge {late.url}" in status["cause"]


def _probed(check, seconds: float) -> bool:
    """Whether the probe of ``check`` (a task on the library's loop) ended within ``seconds``."""
    import time

    end = time.monotonic() + seconds
    while not check.probing.done() and time.monotonic() < end:
        time.sleep(0.05)
    return check.probing.done()


def test_a_judge_misconfigured_during_the_run_fails_health_never_a_failure_reward():
    stand_in = StandInJudge({"good": 5}).start()
    settings = RewardSettings.from_values({"failure_reward": "min", "batch_window_ms": 0})
    reward = PrometheusReward({**JUDGE, "base_url": stand_in.url})
    body = {"query": ["Q? good"], "prompts": ["Q?"]}
    try:
        with running(create_app(reward, settings)) as url:
            first = httpx.post(url + "/get_reward", json=body, timeout=30)
            assert first.status_code == 200 and first.json()["rewards"] == [5.0]  # the canary, then the sample
            assert httpx.get(url + "/health", timeout=5).json()["status"] == "ok"
            stand_in.refuse = 401  # the judge's key is rotated under the run
            later = httpx.post(url + "/get_reward", json=body, timeout=30)
            health = httpx.get(url + "/health", timeout=5)
            stats = httpx.get(url + "/stats", timeout=5).json()
    finally:
        stand_in.stop()
    assert later.status_code == 500 and "HTTP 401" in later.json()["error"] and "rewards" not in later.json()
    assert health.status_code == 503 and health.json()["status"] == "failing" and "HTTP 401" in health.json()["cause"]
    assert stats["judge_failures"] == 0


def test_health_turns_degraded_past_the_recent_failure_share():
    table = {"good": "Fine. [RESULT] 4"}
    settings = RewardSettings.from_values(
        {"failure_reward": "min", "batch_window_ms": 0, "degraded_failure_share": 0.3}
    )
    with running(create_app(scripted_reward(table), settings)) as url:

        def send(responses):
            for r in responses:
                got = httpx.post(url + "/get_reward", json={"query": [f"Q? {r}"], "prompts": ["Q?"]}, timeout=30)
                assert got.status_code == 200
            return httpx.get(url + "/health", timeout=5).json()

        early = send(["bad"] * (MIN_SAMPLES - 1))  # every sample failed (no verdict), but too few to tell
        assert early["status"] == "ok" and early["recent_failure_share"] is None
        at = send(["good"] * 2)  # 9 of 11 failed: 0.82 > 0.3
        assert at["status"] == "degraded" and "of the last 11 samples failed" in at["cause"]
        assert at["recent_failure_share"] == pytest.approx(9 / 11, abs=1e-3)
        assert send(["good"] * 20)["status"] == "ok"  # 9 of 31: 0.29


@pytest.mark.parametrize(
    "share, failed, status", [(0.5, 5, "ok"), (0.5, 6, "degraded"), (1.0, 10, "ok"), (0.0, 1, "degraded")]
)
def test_server_health_threshold(share, failed, status):
    health = ServerHealth(JudgeHealth(), degraded_failure_share=share)
    health.record([True] * failed + [False] * (10 - failed))
    assert health.status()["status"] == status
    health.misconfigured("judge http://j/v1: HTTP 404")
    assert health.status()["status"] == "failing" and "404" in health.status()["cause"]


def test_the_threshold_is_a_checked_setting():
    from prom_reward.errors import ConfigError

    assert RewardSettings.from_values({"failure_reward": "min"}).degraded_failure_share == 0.5
    with pytest.raises(ConfigError, match="degraded_failure_share: expected a number in \\[0, 1\\], got 2.0"):
        RewardSettings.load({"failure_reward": "min", "degraded_failure_share": "2"}, env={})


def test_a_judge_trickling_its_models_reply_does_not_hold_the_start_up():
    """A reply sent a byte at a time must not hold ``check_judge`` (and the command's start) for as long as the
    judge keeps trickling: the whole reply must come within the timeout."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler

    from prom_reward.backends.base import JudgeServer
    from prom_reward.rewards.startup import check_judge
    from tests.fakes import ThreadingHTTPServer

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while not stop.wait(0.2):
                self.wfile.write(b" ")
                self.wfile.flush()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    health = JudgeHealth()
    try:
        start = time.monotonic()
        check = check_judge(JudgeServer((url,), None), timeout=1.0, health=health, probe_every=60)
        took = time.monotonic() - start
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()
    assert took < 5 and check.reachable == {url: False}, (took, check)
    assert (
        health.status()["status"] == "degraded"
        and f"GET /models failed: Timeout on {url}/models (no whole reply within 1 s)" in health.status()["cause"]
    )


KEYED = {"good": 5}


@pytest.fixture
def keyed_judge(monkeypatch):
    """A stand-in judge that wants the key ``sekret``, with no key in the environment."""
    monkeypatch.delenv("PROM_REWARD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = StandInJudge(KEYED, api_key="sekret").start()
    yield judge
    judge.stop()


def test_a_key_given_in_the_judge_options_of_the_config_file_reaches_the_start_up(keyed_judge, tmp_path, monkeypatch):
    """Issue 44: ``judge: {api_key: ...}`` in ``--config`` exited 2 "GET /models answered HTTP 401": the start-up
    asked ``GET /models`` with the environment's key only."""
    from prom_reward.integrations import openrlhf_server

    served: list = []
    monkeypatch.setattr(openrlhf_server, "serve_reward", lambda reward, *a, **k: served.append(reward))
    cfg = tmp_path / "k.yaml"
    cfg.write_text(f"server: ['{keyed_judge.url}']\njudge:\n  api_key: sekret\nfailure_reward: min\n")
    assert main(["reward-server", "--config", str(cfg), "--port", str(free_port())]) == 0
    (reward,) = served
    assert reward(prompts=["Q?"], completions=["good"]) == [5.0]
    assert len(keyed_judge.keys) >= 3 and set(keyed_judge.keys) == {"Bearer sekret"}  # models, canary, the sample


def test_a_key_given_to_verl_reaches_the_start_up(keyed_judge):
    from prom_reward.integrations import verl as prom_verl

    try:
        out = prom_verl.compute_score_sync(
            "a", "good", None, {"question": "Q?"}, server=keyed_judge.url, judge={"api_key": "sekret"}, failure_reward=0
        )
    finally:
        prom_verl.reset()
    assert out["score"] == 5.0 and out["judge_failed"] == 0.0
    assert len(keyed_judge.keys) >= 3 and set(keyed_judge.keys) == {"Bearer sekret"}  # models, canary, the sample


@pytest.mark.parametrize(
    "argv, says, not_says",
    [
        ([], "then their request fails with JudgeUnavailableError", "then get the failure reward"),
        (["--outage-on-exhausted", "fail"], "then get the failure reward", "fails with JudgeUnavailableError"),
    ],
)
def test_the_start_up_warning_says_what_on_exhausted_does(argv, says, not_says, monkeypatch, caplog):
    """Issue 44: the warning said samples "get the failure reward" while the default ``raise`` answers 503."""
    from prom_reward.integrations import openrlhf_server

    monkeypatch.setattr(openrlhf_server, "serve_reward", lambda *a, **k: None)
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: down at start
    with caplog.at_level("WARNING", logger="prom_reward.rewards.startup"):
        code = main(["reward-server", "--server", url, "--failure-reward", "min", "--port", str(free_port()), *argv])
    assert code == 0 and says in caplog.text and not_says not in caplog.text, caplog.text
