"""One judge specification per run (issue 44): ``JudgeSpec`` is resolved once at start (a server's model asked once,
``GET /models``), and the same spec reaches the start-up check, every request and the store key; the job flags are
its declared fields, and a bad value names the flag on the command line and the field in Python."""

from __future__ import annotations

import asyncio
import json

import pytest

from prom_reward.backends.store import JudgmentStore
from prom_reward.cli.main import build_parser, main
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.declared import declared
from prom_reward.errors import ConfigError
from tests.fakes import StandInJudge
from tests.jobs.helpers import rows, write


def _models_asked(judge: StandInJudge) -> int:
    return sum(path == "/v1/models" for path, _ in judge.server.calls)


def test_a_job_asks_the_server_its_model_once_and_every_surface_reads_it(tmp_path, capsys, monkeypatch) -> None:
    """No ``--model``, a ``--store`` and a key from the environment: one ``GET /models`` for the run; the canary and
    every row are asked with that model and that key, and the store keys every judgment by it."""
    monkeypatch.setenv("PROM_REWARD_API_KEY", "sekret")
    judge = StandInJudge(model="served-judge", api_key="sekret").start()
    src = write(tmp_path / "in.jsonl", rows("grade", 3))
    store = tmp_path / "st.sqlite"
    try:
        argv = ["grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--server", judge.url, "--rubric", "helpfulness"]
        assert main([*argv, "--store", str(store), "--quiet"]) == 0
    finally:
        judge.stop()
    chats = [body for path, body in judge.server.calls if path == "/v1/chat/completions"]
    assert _models_asked(judge) == 1
    assert len(chats) == 3 + 1 and {body["model"] for body in chats} == {"served-judge"}  # the rows and the canary
    assert judge.keys and set(judge.keys) == {"Bearer sekret"}  # GET /models included
    opened = JudgmentStore(str(store))
    try:
        assert opened.models() == {"served-judge": 3 + 1}  # the rows and the canary
    finally:
        opened.close()
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["failed"] == 0


def test_a_key_given_as_a_judge_option_reaches_the_start_up_check_and_every_request(monkeypatch) -> None:
    from prom_reward.integrations.settings import RewardSettings
    from prom_reward.rewards.startup import check_judge

    monkeypatch.delenv("PROM_REWARD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = StandInJudge(api_key="from-options").start()
    try:
        settings = RewardSettings.load(
            {"server": judge.url, "failure_reward": 0, "judge": {"api_key": "from-options"}}, env={}
        )
        spec = settings.judge_spec()
        reward = settings.build_reward()
        assert reward.judge_server() == spec.judge_server  # the start-up check reads the spec the judge is built from
        check = check_judge(reward.judge_server(), reward=reward)
        assert check.reachable == {judge.url: True}
        assert reward(prompts=["q"], completions=["Good answer"])[0] is not None
        reward.close()
    finally:
        judge.stop()
    calls = [path for path, _ in judge.server.calls if path.startswith("/v1/")]
    assert judge.chats >= 1 and "/v1/models" in calls
    assert len(judge.keys) == len(calls) and set(judge.keys) == {"Bearer from-options"}  # start-up check included


def test_the_job_flags_are_the_declared_fields() -> None:
    grade = build_parser()._subparsers._group_actions[0].choices["grade"]  # type: ignore[union-attr]
    flags = {a.dest: a for a in grade._actions}
    for d in declared(JudgeSpec):
        assert flags[d.name].option_strings[0] == "--" + d.name.replace("_", "-")  # --enforce-eager: and --no-
        assert flags[d.name].help == d.rules.help


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [("--num-samples", "0", "an int >= 1"), ("--gpu-memory-utilization", "1.5", "a number in (0, 1]")],
)
def test_a_bad_judge_option_names_the_flag_on_the_command_line_and_the_field_in_python(
    tmp_path, capsys, flag: str, value: str, said: str
) -> None:
    src = write(tmp_path / "in.jsonl", rows("grade", 1))
    assert main(["grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--model", "m", flag, value]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: expected {said}" in err and not (tmp_path / "o.jsonl").exists()
    field = flag.removeprefix("--").replace("-", "_")
    with pytest.raises(ConfigError, match=rf"^{field}: expected {said.replace('(', '[(]')}") as e:
        JudgeSpec(**{field: float(value) if "." in value else int(value)})
    assert e.value.setting == field


def test_prometheus_judge_keywords_and_the_spec_say_the_same_judge() -> None:
    options = {
        "backend": "openai",
        "base_url": "http://j:8000/v1/",
        "model": "m",
        "api_key": "k",
        "expected_score": True,
        "truncate_response": True,
        "sampling": {"top_p": 0.5},
        "max_retries": 0,
    }
    spec = JudgeSpec.of(options, max_tokens=64)
    assert (spec.server, spec.expected, spec.truncate, spec.options) == (
        ("http://j:8000/v1",),
        True,
        True,
        {"sampling": {"top_p": 0.5}, "max_retries": 0},
    )
    judge = spec.build()
    try:
        assert judge.backend.server == spec.judge_server  # URLs, model and key as the start-up check reads them
        assert judge.sampling.max_tokens == 64 and judge.sampling.top_p == 0.5 and judge.max_retries == 0
        assert judge.truncate_response and (judge.sampling.logprobs or 0) >= 20
    finally:
        judge.close()
    assert asyncio.run(JudgeSpec.of({"backend": "scripted"}).aresolve()).model is None  # no server: nothing to ask


def test_a_server_not_answering_leaves_the_model_to_its_first_request() -> None:
    spec = JudgeSpec(server=("http://127.0.0.1:9/v1",))
    assert asyncio.run(spec.aresolve(timeout=2)).model is None
