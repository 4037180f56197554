"""``RewardSettings``: one precedence (explicit > environment > YAML > defaults), one validation, the docs'
tables generated from it, and the reward-server's start-up checks, token handling and log redaction."""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from prom_reward.backends.base import JudgeServer
from prom_reward.cli.main import build_parser, main
from prom_reward.errors import ConfigError
from prom_reward.integrations.openrlhf_server import RedactTokens, log_config, redact
from prom_reward.integrations.settings import RewardSettings, flag_name, setting_names, settings_fields, settings_table
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.startup import check_judge
from tests.fakes import StandInJudge, free_port
from tests.integrations.test_canary import _probed

REPO = Path(__file__).resolve().parents[2]


def test_precedence_explicit_then_environment_then_yaml_then_defaults(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("rubric: honesty\nmax_batch_size: 32\nbatch_window_ms: 10\nfailure_reward: 0\n")
    env = {"PROM_REWARD_CONFIG": str(f), "PROM_REWARD_MAX_BATCH_SIZE": "64", "PROM_REWARD_BATCH_WINDOW_MS": "20"}
    s = RewardSettings.load({"batch_window_ms": "30"}, env=env)
    assert (s.reward.rubric, s.max_batch_size, s.batch_window_ms, s.group_wait_s) == ("honesty", 64, 30.0, 60.0)
    explicit_file = tmp_path / "other.yaml"
    explicit_file.write_text("failure_reward: min\nrubric: harmlessness\n")
    s = RewardSettings.load({"config_file": str(explicit_file)}, env=env)  # an explicit file wins over the env's
    assert (s.reward.rubric, s.failure_reward.value, s.max_batch_size) == ("harmlessness", "min", 64)


# (setting, YAML value, environment text, flag text, where the value lands, the typed flag value, the default)
SOURCES = [
    ("max_batch_size", 32, "64", "16", lambda s: s.max_batch_size, 16, 256),
    ("server", ["http://y/v1"], "http://e/v1", "http://f/v1", lambda s: s.server, ("http://f/v1",), ()),
    ("rubric", "honesty", "harmlessness", "helpfulness", lambda s: s.reward.rubric, "helpfulness", "helpfulness"),
    ("num_samples", 5, "4", "2", lambda s: s.reward.num_samples, 2, 3),
    ("log_feedback", False, "true", "false", lambda s: s.reward.log_feedback, False, True),
    ("overlong_baseline", 300, "group_median", "900", lambda s: s.reward.overlong_baseline, 900.0, "group_median"),
    ("outage_budget_s", 30, "40", "50", lambda s: s.reward.outage.budget_s, 50.0, 150.0),
    ("outage_on_exhausted", "fail", "raise", "fail", lambda s: s.reward.outage.on_exhausted, "fail", "raise"),
    ("outage_call_timeout_s", 3, "none", "7", lambda s: s.reward.outage.call_timeout_s, 7.0, None),
]


@pytest.mark.parametrize("name, yaml_value, env_text, flag_text, at, flag_value, default", SOURCES)
def test_each_setting_through_flag_environment_and_yaml_in_one_precedence(
    name, yaml_value, env_text, flag_text, at, flag_value, default, tmp_path
):
    """One name everywhere: field ``foo_bar`` <-> ``--foo-bar`` <-> ``PROM_REWARD_FOO_BAR`` <-> YAML ``foo_bar``;
    a flag given wins over the environment, the environment over YAML, YAML over the default."""
    from prom_reward.cli.servers import reward_server_settings

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"failure_reward": 0, name: yaml_value}))
    env = {f"PROM_REWARD_{name.upper()}": env_text}
    base = ["reward-server", "--failure-reward", "0"]

    def settings(argv, env):
        return reward_server_settings(build_parser().parse_args([*base, *argv]), env)

    assert at(settings([], {})) == default
    assert at(settings(["--config", str(f)], {})) == at(RewardSettings.load({"config_file": str(f)}, env={}))
    from_env = settings(["--config", str(f)], env)
    assert (
        at(from_env)
        == at(RewardSettings.load({"failure_reward": 0}, env=env))
        != at(settings(["--config", str(f)], {}))
    )
    assert at(settings(["--config", str(f), flag_name(name), flag_text], env)) == flag_value


@pytest.mark.parametrize("name", [n for n in setting_names() if n not in ("judge", "failure_reward", "server")])
def test_every_setting_reads_its_default_from_its_text_through_flag_environment_and_yaml(name, tmp_path):
    """Each setting's default, written as text, comes back as the default from ``--name``, ``PROM_REWARD_NAME`` and
    the YAML key ``name``: every field has its three names and a conversion from text."""
    from prom_reward.cli.servers import reward_server_settings

    default = next(d.default for n, _, d in settings_fields() if n == name)
    text = "none" if default is None else ",".join(default) if isinstance(default, tuple) else str(default)
    base = RewardSettings.load({"failure_reward": 0}, env={})
    from_env = RewardSettings.load({"failure_reward": 0}, env={f"PROM_REWARD_{name.upper()}": text})
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"failure_reward": 0, name: text}))
    from_yaml = RewardSettings.load({"config_file": str(f)}, env={})
    if text and default is not None:  # an unset default is given by leaving the flag out
        args = build_parser().parse_args(["reward-server", "--failure-reward", "0", flag_name(name), text])
        assert _values(reward_server_settings(args, {})) == _values(base)
    assert _values(from_env) == _values(from_yaml) == _values(base)


def _values(s: RewardSettings) -> dict:
    """The settings' values (``FailurePolicy`` has no equality: its value stands for it)."""
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)} | {"failure_reward": s.failure_reward.value}


@pytest.mark.parametrize(
    "name, closest",
    [
        ("servers", "server"),
        ("call_timeout_s", "outage_call_timeout_s"),
        ("on_outage", None),  # a former name is a name like any other (no rename shims)
        ("truncate_response", None),
    ],
)
def test_a_name_that_is_no_setting_is_refused_with_the_closest_from_every_source(name, closest, tmp_path, caplog):
    words = (
        re.escape(f"unknown setting(s) ['{name}']")
        + ".*"
        + (re.escape(f"closest: {name} -> {closest}") if closest else "")
    )
    with pytest.raises(ConfigError, match=words):
        RewardSettings.load({"failure_reward": 0, name: "x"}, env={})
    f = tmp_path / "s.yaml"
    f.write_text(f"failure_reward: 0\n{name}: x\n")
    with pytest.raises(ConfigError, match=words) as e:
        RewardSettings.load({"config_file": str(f)}, env={})
    assert "renamed" not in str(e.value) and (closest is not None or "closest" not in str(e.value))
    with caplog.at_level(logging.WARNING):  # a variable that is no setting is warned about, as every unknown one
        RewardSettings.load({"failure_reward": 0}, env={f"PROM_REWARD_{name.upper()}": "x"})
    assert f"PROM_REWARD_{name.upper()} is not a prom-reward setting and is ignored" in caplog.text


def test_one_set_of_defaults():
    """The framework paths' reward is ``RewardConfig()``, the one TRL's ``PrometheusReward`` gets by default; past the
    outage budget every path raises (a run that stops beats one that trains on failure rewards)."""
    s = RewardSettings.load({"failure_reward": 0}, env={})
    assert s.reward == RewardConfig(failure_reward=0)  # the one field these paths require, TRL's leave unset
    trl = PrometheusReward({"backend": "scripted"}).config
    assert dataclasses.replace(s.reward, failure_reward=None) == RewardConfig() == trl
    assert s.reward.outage == OutagePolicy() and s.reward.outage.on_exhausted == "raise"
    assert (s.max_batch_size, s.request_timeout, s.batch_window_ms, s.reward.over_context) == (
        256,
        170.0,
        50.0,
        "truncate",
    )


@pytest.mark.parametrize(
    "values, words",
    [
        ({}, "failure_reward: not set.*--failure-reward / PROM_REWARD_FAILURE_REWARD"),
        ({"failure_reward": "lots"}, "failure_reward: expected a number or 'min'"),
        ({"failure_reward": 0, "max_batch_size": "many"}, "max_batch_size: expected an int, got 'many'; fix: give"),
        ({"failure_reward": 0, "max_batch_size": "2.5"}, "max_batch_size"),
        ({"failure_reward": 0, "max_batch_size": 0}, "max_batch_size: expected an int >= 1, got 0"),
        ({"failure_reward": 0, "max_concurrent_batches": 0}, "max_concurrent_batches: expected an int >= 1, got 0"),
        ({"failure_reward": 0, "batch_window_ms": -1}, "batch_window_ms: expected a number >= 0"),
        ({"failure_reward": 0, "group_wait_s": -0.5}, "group_wait_s: expected a number >= 0"),
        ({"failure_reward": 0, "max_tokens": 0}, "max_tokens: expected an int >= 1 .*--max-tokens"),
        ({"failure_reward": 0, "max_tokens": "-5"}, "max_tokens: expected an int >= 1 .*--max-tokens"),
        (
            {"failure_reward": 0, "mode": "pairwise"},
            "mode: expected one of absolute, pairwise_reference, pairwise_group, got 'pairwise'.*--mode / PROM_REWARD",
        ),
        ({"failure_reward": 0, "mode": "pairwise_reference"}, "mode: the framework reward paths take one of"),
        ({"failure_reward": 0, "mode": "pairwise_group"}, "group_size"),
        ({"failure_reward": 0, "mode": "pairwise_group", "group_size": 4, "group_wait_s": 300}, "group_wait_s"),
        ({"failure_reward": 0, "rubric": "no_such_rubric"}, "rubric: .*no_such_rubric"),
        ({"failure_reward": 0, "rubric": "/nonexistent/rubric.yaml"}, "rubric"),
        ({"failure_reward": 0, "score": "median"}, "score.*--score / PROM_REWARD_SCORE / score"),
        ({"failure_reward": 0, "log_feedback": "perhaps"}, "log_feedback: expected True or False, got 'perhaps'"),
        ({"failure_reward": 0, "outage_on_exhausted": "ignore"}, "outage_on_exhausted: expected one of raise, fail"),
        ({"failure_reward": 0, "outage_call_timeout_s": "0"}, "outage_call_timeout_s: .*--outage-call-timeout-s"),
        ({"failure_reward": 0, "server": "judge:8000"}, "server: expected 'http"),
        ({"failure_reward": 0, "rubrik": "x"}, "unknown setting"),
        (
            {"failure_reward": "min", "mode": "pairwise_group", "group_size": 2, "group_reward": "bradley_terry"},
            "Bradley-Terry",
        ),
    ],
)
def test_one_validation(values, words):
    with pytest.raises(ConfigError, match=words):
        RewardSettings.load(values, env={})


@pytest.mark.parametrize(
    "name",
    [
        "outage_budget_s",
        "outage_backoff_s",
        "outage_max_backoff_s",
        "outage_call_timeout_s",
        "request_timeout",
        "batch_window_ms",
        "group_wait_s",
        "max_batch_size",
        "max_concurrent_batches",
        "num_samples",
        "max_tokens",
        "group_size",
        "length_min_group",
    ],
)
@pytest.mark.parametrize("text", ["nan", "1e999", "-1e999"])
def test_a_non_finite_number_is_refused_from_the_environment_and_yaml(name, text, tmp_path):
    """NaN and infinity ("1e999") name their setting (never an OverflowError, never a budget or a wait that never
    ends: a NaN outage budget retried a dead judge forever)."""
    with pytest.raises(ConfigError, match=rf"^{name}\b"):
        RewardSettings.load(env={"PROM_REWARD_FAILURE_REWARD": "0", f"PROM_REWARD_{name.upper()}": text})
    f = tmp_path / "s.yaml"
    f.write_text(f"failure_reward: 0\n{name}: {text}\n")
    with pytest.raises(ConfigError, match=rf"^{name}\b"):
        RewardSettings.load({"config_file": str(f)}, env={})


@pytest.mark.parametrize("data", [b"failure_reward: 0\nrubric: \xff\xfe\n", b"\xff\xfefailure_reward: 0\n"])
def test_a_yaml_file_that_is_not_utf8_is_refused_naming_it(data, tmp_path):
    f = tmp_path / "s.yaml"
    f.write_bytes(data)
    words = r"config_file: .*s\.yaml.*not UTF-8 text \(byte \d+.*fix: save it as UTF-8"
    with pytest.raises(ConfigError, match=words):
        RewardSettings.load({"config_file": str(f)}, env={})


@pytest.mark.parametrize("sampling", [[1], "x", 3])
def test_judge_sampling_that_is_not_a_mapping_is_refused_naming_it(sampling):
    """With max_tokens set, a judge.sampling that is not a mapping was a TypeError (or ValueError) at start."""
    s = RewardSettings.load(
        {"failure_reward": 0, "server": "http://a/v1", "max_tokens": 5, "judge": {"sampling": sampling}}, env={}
    )
    with pytest.raises(ConfigError, match=r"judge.sampling: expected a mapping of sampling options .*got "):
        s.judge_spec().kwargs()


def test_a_broken_rubric_file_is_refused(tmp_path):
    f = tmp_path / "rubric.yaml"
    f.write_text("criteria: [unclosed\n")
    with pytest.raises(ConfigError, match="rubric"):
        RewardSettings.load({"failure_reward": 0, "rubric": str(f)}, env={})


def test_conversions_from_text():
    s = RewardSettings.load(
        env={
            "PROM_REWARD_FAILURE_REWARD": "-1",
            "PROM_REWARD_SERVER": "http://a/v1, http://b/v1",
            "PROM_REWARD_STRIP": "</s>,<|im_end|>",
            "PROM_REWARD_NORMALIZE": "",
            "PROM_REWARD_OUTAGE_CALL_TIMEOUT_S": "none",
            "PROM_REWARD_MAX_TOKENS": "64",
            "PROM_REWARD_LENGTH_CORRECTION": "yes",
        }
    )
    assert s.server == ("http://a/v1", "http://b/v1") and s.strip == ("</s>", "<|im_end|>")
    assert s.reward.normalize is None and s.reward.outage.call_timeout_s is None and s.max_tokens == 64
    assert s.failure_reward.value == -1.0 and s.reward.length_correction is True


def test_a_ready_reward_keeps_its_config_and_refuses_reward_settings_beside_it():
    reward = PrometheusReward({"backend": "scripted"}, RewardConfig(rubric="honesty"))
    s = RewardSettings.around(reward.config, {"failure_reward": 0, "max_batch_size": 8}, env={})
    assert s.reward == dataclasses.replace(reward.config, failure_reward=0) and s.max_batch_size == 8
    with pytest.raises(ConfigError, match="rubric: reward settings of a ready reward are its RewardConfig's"):
        RewardSettings.around(reward.config, {"failure_reward": 0, "rubric": "x"}, env={})


def test_every_reward_path_gets_the_same_reward_config(tmp_path, monkeypatch):
    """One settings source (a YAML file, ``PROM_REWARD_CONFIG``) read by the reward-server command, OpenRLHF's
    ``reward_func``, verl's entry, and TRL's two rewards built from ``RewardSettings``: one ``RewardConfig``."""
    from prom_reward.cli.servers import reward_server_settings
    from prom_reward.integrations import openrlhf_func
    from prom_reward.integrations import verl as prom_verl

    judge = StandInJudge(model="prometheus").start()
    values = {
        "server": judge.url,
        "failure_reward": 0,
        "rubric": "honesty",
        "score": "mean",
        "num_samples": 5,
        "normalize": "unit",
        "log_feedback": False,
        "over_context": "fail",
        "outage_budget_s": 12,
        "outage_on_exhausted": "fail",
        "length_correction": True,
    }
    f = tmp_path / "reward.yaml"
    f.write_text(yaml.safe_dump(values))
    for key in [k for k in __import__("os").environ if k.startswith("PROM_REWARD_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(f))
    try:
        server = reward_server_settings(build_parser().parse_args(["reward-server"])).build_reward().config
        func = openrlhf_func.batched_reward().reward.config
        verl = prom_verl._prepare(extra_info={"question": "q"})[0].batched.reward.config
    finally:
        openrlhf_func.reset()
        prom_verl.reset()
        judge.stop()
    trl = PrometheusReward({"backend": "scripted"}, RewardSettings.from_values(values).reward).config
    online_dpo = OnlineDPOJudgeReward({"backend": "scripted"}, RewardSettings.from_values(values).reward).config
    assert server == func == verl == trl == online_dpo != RewardConfig()
    assert (trl.rubric, trl.num_samples, trl.log_feedback, trl.outage.budget_s, trl.outage.on_exhausted) == (
        "honesty",
        5,
        False,
        12.0,
        "fail",
    )


def _doc_table(doc: str) -> str:
    text = (REPO / "docs" / doc).read_text()
    match = re.search(r"<!-- settings:start -->\n(.*?)\n<!-- settings:end -->", text, re.S)
    assert match, f"docs/{doc} has no settings table between the markers"
    return match.group(1)


def test_the_docs_table_is_the_settings_model():
    """One table (docs/openrlhf.md; docs/verl.md links to it), generated from the declared fields
    (``prom_reward.declared``): every ``RewardConfig`` field, its ``outage``'s, and ``RewardSettings``' own, each
    with its one name and what it takes (the bounds and choices its refusal says)."""
    table = _doc_table("openrlhf.md")
    assert table == settings_table()
    assert "settings:start" not in (REPO / "docs" / "verl.md").read_text()
    names = {f.name for f in dataclasses.fields(RewardConfig)} - {"outage"}
    names |= {"outage_" + f.name for f in dataclasses.fields(OutagePolicy)}
    names |= {f.name for f in dataclasses.fields(RewardSettings)} - {"reward"}
    assert set(setting_names()) == names and len(table.splitlines()) == len(names) + 2
    for name in names - {"judge"}:
        assert f"| `{name}` | `{flag_name(name)}` | `PROM_REWARD_{name.upper()}` |" in table, name
    assert "| `PROM_REWARD_NUM_SAMPLES` | `3` | an int >= 1 |" in table
    assert "| `PROM_REWARD_OUTAGE_ON_EXHAUSTED` | `raise` | one of raise, fail |" in table
    with pytest.raises(ConfigError, match=r"num_samples: expected an int >= 1, got 0"):
        RewardSettings.load({"failure_reward": 0, "num_samples": 0}, env={})


def test_every_setting_has_a_reward_server_flag_and_an_environment_variable():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["reward-server"]
    flags = {s for a in sub._actions for s in a.option_strings}
    for name in setting_names():
        if name == "judge":
            continue
        assert flag_name(name) in flags, name
    assert "--token-file" in flags and "--config" in flags


def test_check_judge_refuses_a_wrong_model_and_warns_about_a_down_judge(caplog):
    judge = StandInJudge(model="prometheus").start()
    try:
        assert check_judge(JudgeServer((judge.url,), "prometheus")).models == {judge.url: ["prometheus"]}
        with pytest.raises(ConfigError, match="does not serve the model 'other'.*prometheus"):
            check_judge(JudgeServer((judge.url,), "other"))
    finally:
        judge.stop()
    late = StandInJudge(model="prometheus")
    from prom_reward.rewards.outage import JudgeHealth

    health = JudgeHealth()
    with caplog.at_level(logging.WARNING):
        check = check_judge(JudgeServer((late.url,), "prometheus"), health=health, timeout=1.0, probe_every=0.2)
    assert check.reachable == {late.url: False} and "not answering" in caplog.text
    assert health.status()["status"] == "degraded"
    late.start()
    try:
        assert _probed(check, 5) and health.status()["status"] == "ok"
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
        (["--max-batch-size", "0"], "--max-batch-size: expected"),
        (["--failure-reward", "lots"], "--failure-reward: expected a number or 'min'"),
        (["--rubric", "/nonexistent/rubric.yaml"], "rubric"),
        (["--outage-on-exhausted", "ignore"], "--outage-on-exhausted"),
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
    """An in-process model beside a policy on the same GPU takes only its share (env, YAML or flag)."""
    s = RewardSettings.load({"failure_reward": 0, "model": "org/judge"}, env={})
    assert "gpu_memory_utilization" not in s.judge_spec().kwargs()  # unset: the engine's own default (0.9)
    s = RewardSettings.load(
        {"failure_reward": 0, "model": "org/judge"}, env={"PROM_REWARD_GPU_MEMORY_UTILIZATION": "0.3"}
    )
    assert s.judge_spec().kwargs() == {"model": "org/judge", "backend": "vllm", "gpu_memory_utilization": 0.3}
    served = RewardSettings.load(
        {"failure_reward": 0, "server": "http://j:1/v1"}, env={"PROM_REWARD_GPU_MEMORY_UTILIZATION": "0.3"}
    )
    assert "gpu_memory_utilization" not in served.judge_spec().kwargs()  # a served judge's share is its server's
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization: expected a number in \(0, 1\] or None, got 1.5"):
        RewardSettings.load({"failure_reward": 0, "gpu_memory_utilization": 1.5}, env={})


def test_a_prom_reward_variable_that_is_no_setting_is_warned_about(caplog):
    """A typo in a ``PROM_REWARD_*`` name (or ``judge``, which is YAML-only) is said, with the closest setting; the
    variables that are not settings (the API key, the cache, ...) are not."""
    env = {
        "PROM_REWARD_FAILURE_REWARD": "0",
        "PROM_REWARD_MAX_BATCH_SIZ": "8",
        "PROM_REWARD_JUDGE": "{}",
        "PROM_REWARD_API_KEY": "k",
        "PROM_REWARD_CACHE": "/tmp/x",
    }
    with caplog.at_level(logging.WARNING, logger="prom_reward"):
        settings = RewardSettings.load(env=env)
    said = [r.getMessage() for r in caplog.records]
    assert settings.max_batch_size == RewardSettings(reward=settings.reward).max_batch_size  # the typo changed nothing
    assert said == [
        "PROM_REWARD_JUDGE is ignored: judge is given in YAML or explicitly only",
        "PROM_REWARD_MAX_BATCH_SIZ is not a prom-reward setting and is ignored; "
        "did you mean PROM_REWARD_MAX_BATCH_SIZE?",
    ]


def test_a_ready_reward_in_a_yaml_format_is_not_checked_against_the_default_format(tmp_path):
    """``configure(reward)`` (verl, ``reward_func``, the reward server's app): the settings around a reward whose
    judge is in a 3-point YAML format keep its 3-level rubric (it was checked against the judge's format when the
    reward was built; the default format's 5 levels refused it)."""
    from tests.crossings.formats import format_arg, judge_format, rubric_for
    from tests.judges import judge_by_format

    fmt = judge_format(format_arg("tiny.yaml", tmp_path), tmp_path)
    rubric = rubric_for(fmt)
    reward = PrometheusReward(judge_by_format(fmt, {}), RewardConfig(rubric=rubric, failure_reward=-1.0))
    s = RewardSettings.around(reward.config, {"failure_reward": -1.0, "batch_window_ms": 5}, env={})
    assert s.reward.rubric == rubric and len(fmt.scale) != 5
    with pytest.raises(ConfigError, match="rubric: .*prometheus2"):  # from settings alone, the default format holds
        RewardSettings.load({"rubric": rubric, "failure_reward": -1.0}, env={})
