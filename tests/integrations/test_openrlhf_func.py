"""The in-process ``reward_func`` loaded exactly as OpenRLHF 0.11 loads ``--reward.remote_url file.py``
(``SingleTurnAgentExecutor`` + ``spec_from_file_location``), called from its threads one sample at a time."""

from __future__ import annotations

import asyncio
import os
import re

import pytest
from openrlhf.utils import agent

from prom_reward import PrometheusJudge
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.cli.main import main
from prom_reward.errors import ConfigError, InputError
from prom_reward.integrations import openrlhf_func
from prom_reward.integrations.openrlhf_func import configure, reward_func_path
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import PrometheusReward
from tests.integrations.test_openrlhf_http import scripted_reward
from tests.integrations.test_openrlhf_server import PROMPT, TABLE, execute, slow_reward, tokenizer  # noqa: F401 (fixture)


@pytest.fixture(autouse=True)
def fresh_state():
    openrlhf_func.reset()
    yield
    openrlhf_func.reset()


def test_shipped_file_is_a_thin_import_so_state_lives_once():
    a = agent.SingleTurnAgentExecutor(reward_func_path())
    b = agent.SingleTurnAgentExecutor(reward_func_path())
    assert a.reward_func is b.reward_func is openrlhf_func.reward_func


def test_cli_prints_the_file_path(capsys):
    assert main(["openrlhf-func-path"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == reward_func_path() and os.path.isfile(path)


def test_concurrent_executes_are_judged_as_one_batch(tokenizer):  # noqa: F811
    batched = configure(slow_reward(0.01), failure_reward=0, batch_window_ms=300)
    ex = agent.SingleTurnAgentExecutor(reward_func_path())

    async def many():
        return await asyncio.gather(*(execute(ex, tokenizer, f" {k}") for k in range(12)))

    outs = asyncio.run(many())
    assert all(o["reward"] == [3.0] for o in outs)
    # OpenRLHF calls reward_func through asyncio.to_thread: at most min(32, cpus + 4) at once
    threads = min(32, (os.cpu_count() or 1) + 4)
    assert batched.stats.max_batch >= min(threads, 12) - 1 and batched.stats.batches < 12, batched.stats


def test_failures_flagged_and_keys_stable_through_experience_batching(tokenizer):  # noqa: F811
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch, split_experience_batch
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    configure(scripted_reward(TABLE), failure_reward=-1, batch_window_ms=200)
    ex = agent.SingleTurnAgentExecutor(reward_func_path())

    async def three():
        return await asyncio.gather(
            execute(ex, tokenizer, " 4", label=["4"]),
            execute(ex, tokenizer, " ???"),
            execute(ex, tokenizer, " five", max_length=12, max_tokens=4),
        )

    outs = asyncio.run(three())
    assert [o["reward"] for o in outs] == [[5.0], [-1.0], [2.0]]  # the last one left-truncated by OpenRLHF
    gen = SamplesGenerator.__new__(SamplesGenerator)
    batch = make_experience_batch([gen._process_response_into_experience(o, max_len=512) for o in outs])
    assert [float(t) for t in batch.info["judge_failed"]] == [0.0, 1.0, 0.0]
    assert len(split_experience_batch(batch)) == 3


def test_pairwise_group_through_reward_func(tokenizer):  # noqa: F811
    def respond(req, i):
        return "[RESULT] A" if "###Response A:\ngood\n" in req.user else "[RESULT] B"

    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)), mode="pairwise_group")
    configure(reward, failure_reward=0, group_size=2, batch_window_ms=0)
    ex = agent.SingleTurnAgentExecutor(reward_func_path())

    async def group():
        return await asyncio.gather(execute(ex, tokenizer, " good"), execute(ex, tokenizer, " bad"))

    assert [o["reward"] for o in asyncio.run(group())] == [[1.0], [0.0]]


def test_settings_from_env_and_yaml(tmp_path):
    with pytest.raises(ConfigError, match="failure_reward: not set"):
        RewardSettings.load(env={"PROM_REWARD_SERVER": "http://x/v1"})
    with pytest.raises(ConfigError, match="no judge"):
        RewardSettings.load(env={"PROM_REWARD_FAILURE_REWARD": "0"}).build_reward()
    yaml_file = tmp_path / "judge.yaml"
    yaml_file.write_text("server: http://a/v1,http://b/v1\nfailure_reward: min\nmode: pairwise_group\ngroup_size: 4\n")
    cfg = RewardSettings.load(env={"PROM_REWARD_CONFIG": str(yaml_file), "PROM_REWARD_GROUP_SIZE": "8"})
    assert cfg.server == ("http://a/v1", "http://b/v1") and cfg.group_size == 8
    assert cfg.failure_reward.value == "min" and cfg.reward.mode == "pairwise_group"
    yaml_file.write_text("servers: http://a/v1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        RewardSettings.load(env={"PROM_REWARD_CONFIG": str(yaml_file)})


@pytest.mark.integration
def test_real_vllm_judge_through_env_config(vllm_server, tokenizer, monkeypatch):  # noqa: F811
    for key, value in {
        "PROM_REWARD_SERVER": vllm_server,
        "PROM_REWARD_FAILURE_REWARD": "min",
        "PROM_REWARD_MAX_TOKENS": "8",
        "PROM_REWARD_BATCH_WINDOW_MS": "300",
    }.items():
        monkeypatch.setenv(key, value)
    ex = agent.SingleTurnAgentExecutor(reward_func_path())

    async def four():
        return await asyncio.gather(*(execute(ex, tokenizer, f" {k}", label=str(k)) for k in range(4)))

    outs = asyncio.run(four())
    batched = openrlhf_func.batched_reward()
    assert len({frozenset(o["extra_logs"]) for o in outs}) == 1 and all(len(o["reward"]) == 1 for o in outs)
    assert batched.stats.max_batch >= 3 and batched.stats.batched_items == 4
    assert all(o["extra_logs"]["judge_completion_tokens"][0] > 0 for o in outs)


def test_docs_name_the_real_settings():
    import re
    from pathlib import Path

    from prom_reward.integrations.settings import setting_names

    text = (Path(__file__).resolve().parents[2] / "docs" / "openrlhf.md").read_text()
    names = set(setting_names()) | {"config", "token", "api_key", "foo_bar"}  # FOO_BAR: the naming rule
    for var in set(re.findall(r"PROM_REWARD_([A-Z_]+)", text)):
        assert var.lower() in names, var
    assert "$(prom-reward openrlhf-func-path)" in text


def test_backend_down_fails_the_samples_instead_of_raising(tokenizer):  # noqa: F811
    from prom_reward.errors import BackendError

    def respond(req, i):
        raise BackendError("judge server unreachable")

    outage = OutagePolicy(budget_s=0.2, backoff_s=0.05, on_exhausted="fail")
    configure(
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond)), outage=outage), failure_reward=0.5
    )
    out = openrlhf_func.reward_func(
        [PROMPT + " 4", PROMPT + " 5"], [PROMPT, PROMPT], [{"rubric": "no-such-rubric"}, None]
    )
    assert out["rewards"] == [0.5, 0.5] and out["extra_logs"]["judge_failed"] == [1.0, 1.0]
    assert "rubric" in out["failure_reasons"][0] and "judge server unreachable" in out["failure_reasons"][1]
    assert out["extra_logs"]["failed_samples"] == [1.0, 1.0] and out["extra_logs"]["outage_failures"] == [1.0, 1.0]


@pytest.mark.parametrize(
    "queries, prompts, labels, reasons",
    [
        ([None, PROMPT + " ok"], [PROMPT, PROMPT], None, ["sample 0: query must be a str, got", None]),
        ([b"Q ok", PROMPT + " ok"], [PROMPT, PROMPT], None, ["sample 0: query must be a str, got", None]),
        ([PROMPT + " ok", PROMPT + " ok"], [None, PROMPT], [None, None], ["sample 0: prompt must be a str, got", None]),
    ],
    ids=["query-none", "query-bytes", "prompt-none"],
)
def test_a_sample_that_is_not_text_fails_alone(queries, prompts, labels, reasons):
    configure(scripted_reward({"ok": "Fine. [RESULT] 4"}), failure_reward=-1.0)
    out = openrlhf_func.reward_func(queries, prompts, labels)
    assert out["rewards"] == [-1.0, 4.0] and out["extra_logs"]["judge_failed"] == [1.0, 0.0]
    for got, want in zip(out["failure_reasons"], reasons, strict=True):
        assert (got is None) if want is None else want in got, (got, want)


@pytest.mark.parametrize(
    "queries, prompts, labels, words",
    [
        ([PROMPT + " ok"] * 2, [PROMPT], None, "prompts: expected 2 items (one per query), got 1"),
        ([PROMPT + " ok"] * 2, [PROMPT] * 2, ["x"], "labels: expected 2 items (one per query), got 1"),
        ([PROMPT + " ok"], [PROMPT], "x", "labels: expected a list (one item per sample), got str"),
        (PROMPT + " ok", PROMPT, None, "queries: expected a list (one item per sample), got str"),
    ],
    ids=["prompts-short", "labels-short", "labels-str", "queries-str"],
)
def test_arguments_of_the_wrong_shape_raise_input_error_naming_them(queries, prompts, labels, words, caplog):
    configure(scripted_reward({"ok": "Fine. [RESULT] 4"}), failure_reward=-1.0)
    with pytest.raises(InputError, match=re.escape(words)):
        openrlhf_func.reward_func(queries, prompts, labels)
    assert any(r.levelname == "ERROR" and words in r.getMessage() for r in caplog.records)
