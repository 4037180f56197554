"""The judge options every judging subcommand shares: ``--force-verdict POLICY`` from the command line
to the judge, for the jobs, the probe and reward-server alike; the judgment store (``--store``) of every command
that judges a file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from prom_reward.backends.store import JudgmentStore
from prom_reward.cli.main import build_parser, main
from prom_reward.cli.servers import reward_server_judge, reward_server_settings
from prom_reward.cli.voice import judge_spec, open_store
from prom_reward.errors import ConfigError
from tests.reward_faults import Case

SERVER = ["--server", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize("command", ["grade", "compare", "pairs", "probe"])
@pytest.mark.parametrize(
    ("flag", "expected"),
    [([], None), (["--force-verdict", "cut"], "cut"), (["--force-verdict", "always"], "always")]
    + [(["--force-verdict", "never"], "never")],
)
def test_force_verdict_reaches_the_judge_spec(command: str, flag: list[str], expected: str | None) -> None:
    positional = {"grade": ["in.jsonl", "-o", "out.jsonl"], "compare": ["in.jsonl", "-o", "out.jsonl"]}
    positional["pairs"] = ["in.jsonl", "-o", "out.jsonl"]
    args = build_parser().parse_args([command, *positional.get(command, ["-o", "probe.json"]), *SERVER, *flag])
    kwargs = judge_spec(args).kwargs()
    assert kwargs.get("force_verdict") == expected  # not given: the judge's own default (the preset's, else cut)


@pytest.mark.parametrize("value", ["", "yes", "true", "Cut"])
def test_a_bad_force_verdict_is_refused_listing_the_choices(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["grade", "in.jsonl", "-o", "out.jsonl", *SERVER, "--force-verdict", value])
    assert e.value.code == 2
    assert "--force-verdict: invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the old bare flag now needs its policy
        build_parser().parse_args(["grade", "in.jsonl", "-o", "out.jsonl", *SERVER, "--force-verdict"])


@pytest.mark.parametrize(
    ("flag", "configured", "expected"),
    [
        ([], {}, "cut"),
        (["--force-verdict", "never"], {}, "never"),
        ([], {"force_verdict": "always"}, "always"),  # the judge setting (YAML) over the default
        (["--force-verdict", "never"], {"force_verdict": "always"}, "never"),  # the flag over the YAML
    ],
)
def test_reward_server_passes_the_policy_to_its_judge(flag: list[str], configured: dict, expected: str) -> None:
    args = build_parser().parse_args(["reward-server", *SERVER, *flag])
    judge = reward_server_judge(args, settings(args, judge=configured)).build()
    assert judge.force_verdict == expected
    judge.close()


def settings(args, **explicit):  # type: ignore[no-untyped-def]
    """reward-server's settings of ``args`` and the ``explicit`` ones (the ``judge`` setting, as YAML gives it)."""
    loaded = reward_server_settings(args, env={"PROM_REWARD_FAILURE_REWARD": "0"})
    return dataclasses.replace(loaded, **explicit)


def test_reward_server_flags_over_the_judge_setting_over_the_flag_defaults() -> None:
    configured = {"wire": "inst", "endpoint": "completions", "sampling": {"top_p": 0.5, "temperature": 0.9}}
    args = build_parser().parse_args(["reward-server", *SERVER, "--temperature", "0.2", "--num-samples", "3"])
    kwargs = reward_server_judge(args, settings(args, judge=configured)).kwargs()
    assert kwargs["endpoint"] == "completions"  # --endpoint not given: the setting, not the flag's default
    assert kwargs["wire"] == "inst"
    assert kwargs["sampling"] == {"top_p": 0.5, "temperature": 0.2}  # key by key, the flag's temperature wins
    assert "num_samples" not in kwargs  # the reward's setting (RewardConfig.num_samples, score=mean)
    assert settings(args).reward.num_samples == 3
    args = build_parser().parse_args(["reward-server", "--model", "m", "--wire", "raw", "--tensor-parallel-size", "2"])
    local = reward_server_judge(
        args, settings(args, judge={"wire": "chat", "enforce_eager": True, "tensor_parallel_size": 4})
    )
    assert {k: local.kwargs()[k] for k in ("backend", "enforce_eager", "tensor_parallel_size", "wire")} == {
        "backend": "vllm",
        "enforce_eager": True,
        "tensor_parallel_size": 2,
        "wire": "raw",
    }


def test_reward_server_judge_flags_are_the_jobs_bounds_named_by_flag() -> None:
    """The reward server's judge flags are ``JudgeSpec``'s (names, bounds, help), as the jobs': a bad value is
    refused naming its flag, before the judge is built."""
    for argv in (["reward-server", *SERVER], ["grade", "in.jsonl", "-o", "out.jsonl", *SERVER]):
        args = build_parser().parse_args([*argv, "--temperature", "-1"])
        with pytest.raises(ConfigError, match=r"^--temperature: expected a number >= 0"):
            reward_server_judge(args, settings(args)) if argv[0] == "reward-server" else judge_spec(args)
    args = build_parser().parse_args(["reward-server", *SERVER, "--max-model-len", "4096"])
    assert reward_server_judge(args, settings(args)).kwargs()["max_model_len"] == 4096  # a server's, as the jobs'


@pytest.mark.parametrize(("extra", "model"), [([], None), (["--model", "served-judge"], "served-judge")])
def test_a_store_behind_a_server_is_keyed_by_the_served_model_without_a_warning(
    tmp_path, extra: list[str], model: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ``--model``: the keys take the id the server serves once it is asked (``tests/jobs/test_store_server.py``),
    so nothing is left to warn about."""
    argv = ["grade", "in.jsonl", "-o", "o.jsonl", "--server", "http://127.0.0.1:9/v1", "--store", str(tmp_path / "j")]
    judge = judge_spec(build_parser().parse_args(argv + extra)).build()
    assert judge.backend.fingerprint["model"] == model and capsys.readouterr().err == ""
    judge.close()


@pytest.mark.parametrize("command", ["grade", "compare", "pairs", "probe"])
def test_every_command_that_judges_a_file_opens_the_judgment_store(command: str, tmp_path) -> None:
    positional = ["in.jsonl", "-o", "out.jsonl"] if command != "probe" else ["-o", "probe.json"]
    store = tmp_path / "judgments.sqlite"
    argv = [command, *positional, *SERVER, "--model", "m", "--store", str(store), "--store-timeout", "5"]
    opened = open_store(build_parser().parse_args(argv))["store"]
    try:
        assert isinstance(opened, JudgmentStore) and store.exists()  # opened (checked) before any input is read
    finally:
        opened.close()


def test_a_probe_rerun_is_answered_by_its_store(stand_in, tmp_path, capsys) -> None:
    judge = stand_in(Case())
    store, out = str(tmp_path / "judgments.sqlite"), tmp_path / "probe.json"
    argv = ["probe", "--server", judge.url, "--model", judge.model, "--store", store, "--parts", "shifts"]
    argv += ["--limit", "2", "--edits", "self_grade", "--baseline-samples", "1", "-o", str(out)]
    assert main(argv) == 0
    first, asked = shifts(out), judge.chats
    assert asked > 0
    assert main(argv) == 0
    assert judge.chats == asked  # every judgment came from the store
    assert shifts(out) == first


def shifts(record: Path) -> dict:
    """The probe record's score shifts, less their timing."""
    return {k: v for k, v in json.loads(record.read_text())["shifts"].items() if k != "seconds"}
