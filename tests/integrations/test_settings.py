"""``RewardSettings``: one precedence (explicit > environment > YAML > defaults), one validation, the docs'
tables generated from it, and the reward-server's start-up checks, token handling and log redaction."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from prom_reward.cli.main import build_parser, main
from prom_reward.errors import ConfigError
from prom_reward.integrations.openrlhf_server import RedactTokens, log_config, redact
from prom_reward.integrations.settings import RewardSettings, flag_name, setting_names, settings_table
from prom_reward.integrations.startup import check_judge
from tests.fakes import StandInJudge, free_port

REPO = Path(__file__).resolve().parents[2]


def test_precedence_explicit_then_environment_then_yaml_then_defaults(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("rubric: honesty\nmax_batch_size: 32\nbatch_window_ms: 10\nfailure_reward: 0\n")
    env = {"PROM_REWARD_CONFIG": str(f), "PROM_REWARD_MAX_BATCH_SIZE": "64", "PROM_REWARD_BATCH_WINDOW_MS": "20"}
    s = RewardSettings.load({"batch_window_ms": "30"}, env=env)
    assert (s.rubric, s.max_batch_size, s.batch_window_ms, s.group_wait_s) == ("honesty", 64, 30.0, 60.0)
    explicit_file = tmp_path / "other.yaml"
    explicit_file.write_text("failure_reward: min\nrubric: harmlessness\n")
    s = RewardSettings.load({"config_file": str(explicit_file)}, env=env)  # an explicit file wins over the env's
    assert (s.rubric, s.failure_reward.value, s.max_batch_size) == ("harmlessness", "min", 64)


def test_one_set_of_defaults():
    s = RewardSettings(failure_reward=0)
    assert (s.max_batch_size, s.request_timeout, s.batch_window_ms, s.on_outage, s.over_context) == (
        256,
        170.0,
        50.0,
        "fail",
        "truncate",
    )
    assert s.outage().budget_s == 150.0 and s.outage().on_exhausted == "fail"


@pytest.mark.parametrize(
    "values, words",
    [
        ({}, "failure reward: not set"),
        ({"failure_reward": "lots"}, "failure reward: expected a number or 'min'"),
        ({"failure_reward": 0, "max_batch_size": "many"}, "max_batch_size .*expected int"),
        ({"failure_reward": 0, "max_batch_size": "2.5"}, "max_batch_size"),
        ({"failure_reward": 0, "max_batch_size": 0}, "max_batch_size: expected a number > 0"),
        ({"failure_reward": 0, "mode": "pairwise"}, "mode: expected one of absolute, pairwise_group"),
        ({"failure_reward": 0, "mode": "pairwise_group"}, "group_size"),
        ({"failure_reward": 0, "mode": "pairwise_group", "group_size": 4, "group_wait_s": 300}, "group_wait_s"),
        ({"failure_reward": 0, "rubric": "no_such_rubric"}, "rubric: .*no_such_rubric"),
        ({"failure_reward": 0, "rubric": "/nonexistent/rubric.yaml"}, "rubric"),
        ({"failure_reward": 0, "score": "median"}, "score"),
        ({"failure_reward": 0, "on_outage": "ignore"}, "on_outage"),
        ({"failure_reward": 0, "call_timeout_s": "0"}, "call_timeout_s"),
        ({"failure_reward": 0, "judge_url": "judge:8000"}, "judge_url"),
        ({"failure_reward": 0, "reward": {"rubric": "x"}}, "reward: "),
        (
            {
                "failure_reward": "min",
                "mode": "pairwise_group",
                "group_size": 2,
                "reward": {"group_reward": "bradley_terry"},
            },
            "Bradley-Terry",
        ),
    ],
)
def test_one_validation(values, words):
    with pytest.raises(ConfigError, match=words):
        RewardSettings.load(values, env={})


def test_a_broken_rubric_file_is_refused(tmp_path):
    f = tmp_path / "rubric.yaml"
    f.write_text("criteria: [unclosed\n")
    with pytest.raises(ConfigError, match="rubric"):
        RewardSettings(failure_reward=0, rubric=str(f))


def test_conversions_from_text():
    s = RewardSettings.load(
        env={
            "PROM_REWARD_FAILURE_REWARD": "-1",
            "PROM_REWARD_JUDGE_URL": "http://a/v1, http://b/v1",
            "PROM_REWARD_STRIP": "</s>,<|im_end|>",
            "PROM_REWARD_NORMALIZE": "",
            "PROM_REWARD_CALL_TIMEOUT_S": "none",
            "PROM_REWARD_MAX_TOKENS": "64",
        }
    )
    assert s.judge_url == ("http://a/v1", "http://b/v1") and s.strip == ("</s>", "<|im_end|>")
    assert s.normalize is None and s.call_timeout_s is None and s.max_tokens == 64
    assert s.failure_reward.value == -1.0


def _doc_table(doc: str) -> str:
    text = (REPO / "docs" / doc).read_text()
    match = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", text, re.S)
    assert match, f"docs/{doc} has no settings table between the markers"
    return match.group(1)


@pytest.mark.parametrize("doc", ["openrlhf.md", "verl.md"])
def test_docs_tables_are_the_settings_model(doc):
    assert _doc_table(doc) == settings_table()


def test_every_setting_has_a_reward_server_flag_and_an_environment_variable():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["reward-server"]
    flags = {s for a in sub._actions for s in a.option_strings}
    for name in setting_names():
        if name in ("judge", "reward"):
            continue
        assert flag_name(name) in flags, name
    assert "--token-file" in flags and "--config" in flags


def test_check_judge_refuses_a_wrong_model_and_warns_about_a_down_judge(caplog):
    judge = StandInJudge(model="prometheus").start()
    try:
        assert check_judge([judge.url], "prometheus").models == {judge.url: ["prometheus"]}
        with pytest.raises(ConfigError, match="does not serve the model 'other'.*prometheus"):
            check_judge([judge.url], "other")
    finally:
        judge.stop()
    late = StandInJudge(model="prometheus")
    from prom_reward.rewards.outage import JudgeHealth

    health = JudgeHealth()
    with caplog.at_level(logging.WARNING):
        check = check_judge([late.url], "prometheus", health=health, timeout=1.0, probe_every=0.2)
    assert check.reachable == {late.url: False} and "not answering" in caplog.text
    assert health.status()["status"] == "degraded"
    late.start()
    try:
        check.probing.join(5)
        assert not check.probing.is_alive() and health.status()["status"] == "ok"
    finally:
        late.stop()


def test_token_values_are_redacted_from_logs():
    assert (
        redact('127.0.0.1:5 - "POST /get_reward?token=s3cr3t HTTP/1.1" 200')
        == '127.0.0.1:5 - "POST /get_reward?token=*** HTTP/1.1" 200'
    )
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "POST", "/get_reward?x=1&token=s3cr3t", "1.1", 200),
        None,
    )
    RedactTokens().filter(record)
    assert "s3cr3t" not in record.getMessage() and "token=***" in record.getMessage()
    config = log_config()
    assert all("redact_tokens" in h["filters"] for h in config["handlers"].values())


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--rubric", "no_such_rubric"], "no_such_rubric"),
        (["--model", "other-model"], "does not serve the model 'other-model'"),
        (["--max-batch-size", "0"], "max_batch_size"),
        (["--failure-reward", "lots"], "failure reward: expected a number or 'min'"),
        (["--rubric", "/nonexistent/rubric.yaml"], "rubric"),
        (["--on-outage", "ignore"], "on_outage"),
        (["--token-file", "/nonexistent/token"], "--token-file: cannot read"),
    ],
)
def test_reward_server_refuses_bad_configuration_before_serving(argv, words, capsys):
    judge = StandInJudge(model="prometheus").start()
    try:
        code = main(
            ["reward-server", "--server", judge.url, "--failure-reward", "0", "--port", str(free_port()), *argv]
        )
    finally:
        judge.stop()
    assert code == 2 and words in capsys.readouterr().err


def test_reward_server_cli_token_file_redacted_log_and_degraded_health(tmp_path):
    """The real command: a token from a file, a judge that is down at start (warned, probed, then up), the token
    nowhere in the server's own log."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t-t0ken\n")
    judge = StandInJudge({"good": 5})
    port = free_port()
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prom_reward.cli",
                "reward-server",
                "--server",
                judge.url,
                "--failure-reward",
                "-1",
                "--port",
                str(port),
                "--token-file",
                str(token_file),
                "--outage-budget-s",
                "20",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "reward-server did not answer /health in 60 s"
            try:
                health = httpx.get(url + "/health", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert health["status"] == "degraded" and "not answering" in health["cause"]
        judge.start()
        body = {"query": ["Q? good"], "prompts": ["Q?"]}
        assert httpx.post(url + "/get_reward", json=body, timeout=30).status_code == 401
        r = httpx.post(url + "/get_reward?token=s3cr3t-t0ken", json=body, timeout=60)
        assert r.status_code == 200 and r.json()["rewards"] == [5.0], r.text
        assert httpx.get(url + "/health", timeout=5).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        judge.stop()
    text = log_path.read_text()
    assert "not answering" in text and "token=***" in text and "s3cr3t-t0ken" not in text


def _token_of(argv: list[str], env: dict[str, str], monkeypatch) -> str | None:
    from prom_reward.cli.servers import _token

    monkeypatch.delenv("PROM_REWARD_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return _token(build_parser().parse_args(["reward-server", *argv]))


def test_the_token_comes_from_a_file_or_the_environment_and_the_flag_is_warned_about(tmp_path, monkeypatch, capsys):
    f = tmp_path / "token"
    f.write_text("from-file\n")
    env = {"PROM_REWARD_TOKEN": " from-env "}
    assert _token_of(["--token-file", str(f)], env, monkeypatch) == "from-file"  # the file wins
    assert _token_of(["--token", "from-flag"], env, monkeypatch) == "from-env"  # the environment over the flag
    assert capsys.readouterr().err == ""
    assert _token_of(["--token", "from-flag"], {}, monkeypatch) == "from-flag"
    assert "visible to every user in `ps`" in capsys.readouterr().err
    assert _token_of([], {}, monkeypatch) is None
    f.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        _token_of(["--token-file", str(f)], {}, monkeypatch)


def test_an_in_process_judge_takes_the_gpu_share_it_is_given():
    """An in-process judge_model beside a policy on the same GPU takes only its share (env, YAML or flag)."""
    s = RewardSettings.load({"failure_reward": 0, "judge_model": "org/judge"}, env={})
    assert "gpu_memory_utilization" not in s.judge_spec()  # unset: the engine's own default (0.9)
    s = RewardSettings.load(
        {"failure_reward": 0, "judge_model": "org/judge"}, env={"PROM_REWARD_GPU_MEMORY_UTILIZATION": "0.3"}
    )
    assert s.judge_spec() == {"model": "org/judge", "backend": "vllm", "gpu_memory_utilization": 0.3}
    served = RewardSettings.load(
        {"failure_reward": 0, "judge_url": "http://j:1/v1"}, env={"PROM_REWARD_GPU_MEMORY_UTILIZATION": "0.3"}
    )
    assert "gpu_memory_utilization" not in served.judge_spec()  # a served judge's share is its server's
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization: expected a share in \(0, 1\], got 1.5"):
        RewardSettings.load({"failure_reward": 0, "gpu_memory_utilization": 1.5}, env={})
