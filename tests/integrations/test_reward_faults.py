"""The fault matrix of the reward paths, each driven by the framework's own code against a stand-in judge
server (``tests.fakes.StandInJudge``, real HTTP on 127.0.0.1):

- OpenRLHF 0.11.2, HTTP server: ``SingleTurnAgentExecutor.execute`` (its ``_fetch_rewards_via_http``) for
  concurrent samples, then ``make_experience_batch``;
- OpenRLHF 0.11.2, in-process file: the same executor on ``reward_func_path()`` (settings from the environment);
- TRL 1.16: ``GRPOTrainer._calculate_rewards`` of a real trainer;
- verl 0.9.1: ``RewardLoopWorker.compute_score_batch`` on the documented explicit-URL launch.

Cases: a poisoned sample (lone surrogate or NaN in one sample), an over-long response (60 KB, over the
judge's 4,096-token context), a judge outage (503s; for the HTTP server longer than OpenRLHF's own
retry window of five tries a second apart), a judge that stays down past the budget, a hung judge call,
and a judge that starts listening late. No case may crash the trainer or fail a healthy sample; every
failure is flagged, and a judge down past the budget gives the failure reward with the cause (OpenRLHF,
verl) or stops TRL with the cause.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from prom_reward.backends.outage import OutagePolicy
from prom_reward.errors import JudgeUnavailableError
from prom_reward.integrations import openrlhf_func
from prom_reward.integrations import verl as prom_verl
from prom_reward.integrations.openrlhf_server import create_app
from prom_reward.integrations.settings import ENV_PREFIX, RewardSettings, setting_names
from prom_reward.rewards.reward import PrometheusReward
from tests.fakes import StandInJudge
from tests.integrations.test_openrlhf_http import running
from tests.integrations.test_openrlhf_server import PROMPT, execute, tokenizer  # noqa: F401 (fixture)

agent = pytest.importorskip("openrlhf.utils.agent")
pytest.importorskip("verl")

GRADES = {"good": 5, "fair": 2}
LONG = "long " + "x" * 60_000
FAILED = -1.0


@dataclass
class Case:
    """A fault: how the stand-in judge misbehaves, the settings it is met with, the samples and what must come back."""

    judge: dict = field(default_factory=dict)
    late: float = 0.0
    settings: dict = field(default_factory=dict)
    responses: tuple[str, ...] = ("good", "fair")
    labels: tuple = (None, None)
    expected: tuple = (5.0, 2.0)
    """Per sample: the reward, or FAILED (the failure reward, flagged judge_failed)."""


CASES = {
    "poisoned": Case(
        responses=("good", "fair", "good"),
        labels=(None, {"reference_answer": "bad \ud800"}, math.nan),
        expected=(5.0, FAILED, FAILED),
    ),
    "over_context": Case(responses=("good", LONG, "fair"), labels=(None, None, None), expected=(5.0, 3.0, 2.0)),
    "outage": Case(judge={"down_for": 1.5}),
    "dead": Case(judge={"down_for": None}, settings={"outage_budget_s": 1.0}, expected=(FAILED, FAILED)),
    "hung": Case(
        judge={"hang_first": 1},
        settings={"call_timeout_s": 1.0},
        responses=("good", "fair", "good"),
        labels=(None, None, None),
        expected=(5.0, 2.0, 5.0),
    ),
    "late": Case(late=1.5),
}


@pytest.fixture
def stand_in():
    started: list[StandInJudge] = []

    def start(case: Case, **overrides) -> StandInJudge:
        judge = StandInJudge(GRADES, **{**case.judge, **overrides})
        started.append(judge.start(late=case.late))
        return judge

    yield start
    for j in started:
        j.stop()


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    openrlhf_func.reset()
    prom_verl.reset()
    yield
    openrlhf_func.reset()
    prom_verl.reset()


def settings_file(tmp_path: Path, url: str, case: Case) -> Path:
    """The case's settings as the YAML file every framework path reads (``PROM_REWARD_CONFIG``)."""
    values = {
        "judge_url": url,
        "failure_reward": FAILED,
        "batch_window_ms": 100,
        "max_tokens": 32,
        "outage_budget_s": 20.0,
        "request_timeout": 60.0,
        "judge": {"system_role": False, "max_retries": 0},
        **case.settings,
    }
    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def check(case: Case, rewards: list[float], failed: list[float]) -> None:
    assert len(rewards) == len(case.expected) == len(failed)
    for got, flag, want in zip(rewards, failed, case.expected, strict=True):
        assert got == want, (rewards, case.expected)
        assert flag == float(want == FAILED), (failed, case.expected)


# -- OpenRLHF ---------------------------------------------------------------------------
def run_openrlhf(executor, tokenizer, case: Case) -> tuple[list[float], list[float], list]:  # noqa: F811
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    async def all_samples():
        return await asyncio.gather(
            *(
                execute(executor, tokenizer, " " + r, label=label)
                for r, label in zip(case.responses, case.labels, strict=True)
            )
        )

    outs = asyncio.run(all_samples())
    gen = SamplesGenerator.__new__(SamplesGenerator)
    longest = max(len(o["observation_tokens"]) for o in outs)
    batch = make_experience_batch([gen._process_response_into_experience(o, max_len=longest) for o in outs])
    return batch.rewards.flatten().tolist(), [float(t) for t in batch.info["judge_failed"]], outs


@pytest.mark.parametrize("name", sorted(CASES))
def test_openrlhf_reward_server(name, stand_in, tokenizer, tmp_path):  # noqa: F811
    case = CASES[name]
    if name == "outage":  # longer than OpenRLHF's own window: five tries one second apart
        judge = stand_in(case, down_for=6.5)
    else:
        judge = stand_in(case)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, case))}, env={})
    start = time.monotonic()
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        rewards, failed, outs = run_openrlhf(ex, tokenizer, case)
        stats = httpx.get(url + "/stats", timeout=10).json()
        health = httpx.get(url + "/health", timeout=10).json()
    took = time.monotonic() - start
    check(case, rewards, failed)
    assert len({frozenset(o["extra_logs"]) for o in outs}) == 1  # one set of log keys: batching never breaks
    assert stats["judge_failures"] == sum(r == FAILED for r in case.expected)
    if name == "outage":
        assert took > 6.5 and health["status"] == "ok" and health["failures"] > 0
    if name == "dead":
        assert health["status"] == "degraded" and "503" in health["cause"] and stats["judge_unavailable"] == 0
    if name == "over_context":
        assert max(o["extra_logs"]["truncated_responses"][0] for o in outs) >= 1
        assert any(r.startswith("long xxx") and len(r) < 20_000 for r in judge.graded)  # truncated, then judged


def test_openrlhf_client_gets_reasons_for_a_poisoned_response_and_a_dead_judge(stand_in, tmp_path):
    """``_fetch_rewards_via_http`` (OpenRLHF's own client) with a lone surrogate in one response of a batch."""
    case = CASES["poisoned"]
    judge = stand_in(case)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, case))}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        queries = [PROMPT + " good", PROMPT + " bad \ud800 bytes", PROMPT + " fair"]

        async def concurrent():
            return await asyncio.gather(*(ex._fetch_rewards_via_http([q], [PROMPT], [None]) for q in queries))

        replies = [r[0] for r in asyncio.run(concurrent())]
    assert [r["rewards"][0] for r in replies] == [5.0, FAILED, 2.0]
    assert "lone surrogate" in replies[1]["failure_reasons"][0] and replies[0]["failure_reasons"] == [None]
    judge.stop()
    dead = stand_in(CASES["dead"])
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, dead.url, CASES["dead"]))}, env={})
    with running(create_app(settings.build_reward(), settings)) as url:
        ex = agent.SingleTurnAgentExecutor(url + "/get_reward")
        [reply] = asyncio.run(ex._fetch_rewards_via_http([PROMPT + " good"], [PROMPT], [None]))
    assert reply["rewards"] == [FAILED] and "failing for" in reply["failure_reasons"][0]
    assert "503" in reply["failure_reasons"][0]


def test_a_hung_judge_call_does_not_block_later_requests(stand_in, tmp_path):
    """The first judge call hangs; requests that arrive after it are answered at once, and the hung one after
    its per-call timeout (retried), not after the backend's 600 s."""
    case = Case(judge={"hang_first": 1}, settings={"call_timeout_s": 4.0, "batch_window_ms": 0})
    judge = stand_in(case)
    settings = RewardSettings.load({"config_file": str(settings_file(tmp_path, judge.url, case))}, env={})
    body = {"query": [PROMPT + " good"], "prompts": [PROMPT]}
    with running(create_app(settings.build_reward(), settings)) as url:

        async def both():
            async def post(delay: float) -> tuple[float, dict]:
                await asyncio.sleep(delay)
                start = time.monotonic()
                async with httpx.AsyncClient(timeout=60) as c:
                    r = await c.post(url + "/", json=body)
                return time.monotonic() - start, r.json()

            return await asyncio.gather(post(0.0), post(0.5), post(0.7))

        (t_hung, first), (t_a, a), (t_b, b) = asyncio.run(both())
        stats = httpx.get(url + "/stats", timeout=10).json()
    assert first["rewards"] == a["rewards"] == b["rewards"] == [5.0]
    assert t_a < 2.0 and t_b < 2.0, (t_a, t_b)
    assert 4.0 <= t_hung < 10.0, t_hung
    assert stats["batcher"]["max_in_flight"] >= 2


@pytest.mark.parametrize("name", sorted(CASES))
def test_openrlhf_reward_func(name, stand_in, tokenizer, tmp_path, monkeypatch):  # noqa: F811
    case = CASES[name]
    judge = stand_in(case)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, case)))
    ex = agent.SingleTurnAgentExecutor(openrlhf_func.reward_func_path())
    rewards, failed, outs = run_openrlhf(ex, tokenizer, case)
    check(case, rewards, failed)
    assert len({frozenset(o["extra_logs"]) for o in outs}) == 1


# -- TRL ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grpo_trainer(tiny_model_dir, tmp_path_factory):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    def placeholder(prompts, completions, **kwargs):
        return [0.0] * len(prompts)

    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("grpo")),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    return GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=placeholder,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [PROMPT] * 4}),
    )


def trl_rewards(trainer, url: str, case: Case) -> list[float]:
    """``GRPOTrainer._calculate_rewards`` with a ``PrometheusReward`` on the stand-in judge."""
    outage = OutagePolicy(
        budget_s=case.settings.get("outage_budget_s", 20.0), call_timeout_s=case.settings.get("call_timeout_s")
    )
    reward = PrometheusReward(
        {"backend": "openai", "base_url": url, "system_role": False, "max_retries": 0, "sampling": {"max_tokens": 32}},
        outage=outage,
    )
    trainer.reward_funcs, trainer.reward_func_names = [reward], ["prometheus"]
    trainer.reward_processing_classes = [None]
    responses = list(case.responses)
    if case is CASES["poisoned"]:
        responses[1] = "fair \ud800"  # TRL hands the reward decoded strings: the surrogate goes in the completion
    inputs = [{"prompt": PROMPT, "rubric": "helpfulness"} for _ in responses]
    out = trainer._calculate_rewards(inputs, [PROMPT] * len(responses), responses, [[1]] * len(responses))
    return out[:, 0].tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_trl_grpo_calculate_rewards(name, stand_in, grpo_trainer):
    case = CASES[name]
    judge = stand_in(case)
    if name == "dead":
        with pytest.raises(JudgeUnavailableError, match=r"failing for .* outage budget .* 503"):
            trl_rewards(grpo_trainer, judge.url, case)
        return
    got = trl_rewards(grpo_trainer, judge.url, case)
    want = [math.nan if w == FAILED else w for w in case.expected]
    if name == "poisoned":
        want = [5.0, math.nan, 5.0]  # the NaN *label* of the OpenRLHF case has no TRL counterpart
    assert [g if g == g else "nan" for g in got] == [w if w == w else "nan" for w in want]


# -- verl -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_verl_reward_loop(name, stand_in, tiny_model_dir, tmp_path, monkeypatch):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from tests.integrations.test_verl_integration import LAUNCHES, compose_config, local, make_data

    case = CASES[name]
    judge = stand_in(case)
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(settings_file(tmp_path, judge.url, case)))
    _, overrides = LAUNCHES["Judge servers of your own (explicit URL)"]
    worker = RewardLoopWorker(compose_config(local(overrides, tiny_model_dir)), reward_router_address=None)
    truths = ["4", math.nan, ""] if name == "poisoned" else [""] * len(case.responses)
    samples = [
        {
            "prompt_text": PROMPT,
            "response": r,
            "ground_truth": t,
            "data_source": "d",
            "extra_info": {"question": PROMPT, "index": i},
        }
        for i, (r, t) in enumerate(zip(case.responses, truths, strict=True))
    ]
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(make_data(worker.input_tokenizer, samples)))
    infos = [o["reward_extra_info"] for o in outputs]
    want = list(case.expected)
    if name == "poisoned":
        want = [5.0, FAILED, 5.0]  # the NaN ground truth fails its sample alone
        assert "ground_truth" in infos[1]["judge_failure_reason"]
    check(Case(expected=tuple(want)), [o["reward_score"] for o in outputs], [i["judge_failed"] for i in infos])
    assert len({tuple(sorted(i)) for i in infos}) == 1
    if name == "dead":
        assert all("failing for" in i["judge_failure_reason"] for i in infos)
