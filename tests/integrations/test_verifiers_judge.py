"""The prom-reward judge inside verifiers 0.4.0: plugged through ``TaskConfig.judges`` (id ``prom-reward``) and
called from a task's own ``@reward``, always scored by verifiers' own ``Task.score``. A scripted judge for the
logic (scores, normalisation, a judgment that could not decide, per-row rubrics, batching of concurrent rollouts),
the stand-in judge server (real HTTP on 127.0.0.1) for a judge format other than Prometheus 2 and for a
misconfigured or unreachable judge, and the real CPU vLLM server for one end-to-end run."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.configs.agent import AgentConfig  # noqa: E402
from verifiers.v1.errors import TaskError  # noqa: E402
from verifiers.v1.trace import AgentInfo, Trace, TraceTask  # noqa: E402
from verifiers.v1.utils.loaders import judge_class  # noqa: E402

from prom_reward.backends.base import Completion, TokenLogprobs  # noqa: E402
from prom_reward.errors import JudgeConfigError, JudgeUnavailableError, PromRewardError  # noqa: E402
from prom_reward.format.judge_format import JUDGE_FORMATS  # noqa: E402
from prom_reward.integrations import verifiers_judge  # noqa: E402
from prom_reward.integrations.verifiers_judge import PrometheusVerifiersJudge, PrometheusVerifiersJudgeConfig  # noqa: E402
from tests.fakes import StandInJudge  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
THREE = {"criteria": "Is the answer right?", "descriptions": ["wrong", "partly right", "right"]}
FIVE = {"criteria": "Is it brief?", "descriptions": ["rambling", "long", "fair", "short", "brief"]}


class Row(vf.TaskData):  # type: ignore[misc]
    answer: str = "4"
    rubric: Any = None


class Plain(vf.Task[Row, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    """A task with no reward of its own: the plugged judge is its only reward."""


class OwnReward(vf.Task[Row, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    """A task whose ``@reward`` calls the judge itself (verifiers' documented pattern)."""

    JUDGE: dict[str, Any] = {}

    @vf.reward
    async def judged(self, trace: Any) -> float:
        judge = PrometheusVerifiersJudge(PrometheusVerifiersJudgeConfig(**self.JUDGE))
        result = await judge.evaluate(
            trace=trace, question=self.data.prompt_text, response=trace.last_reply, answer=self.data.answer
        )
        return float(result.parsed)


@pytest.fixture(autouse=True)
def _fresh():
    verifiers_judge.reset()
    yield
    verifiers_judge.reset()


def scripted(outputs: list[str], **more: Any) -> dict[str, Any]:
    return {"id": "prom-reward", "judge": {"backend": "scripted", "outputs": outputs, "max_retries": 0}, **more}


def trace_of(row: Row, reply: str) -> Trace:
    return Trace(task=TraceTask(type="Row", data=row), agent=AgentInfo(config=AgentConfig()), root_reply=reply)


def sent(trace: Trace) -> str:
    """The judge prompt recorded on the trace ("" when the sample never made one)."""
    messages = trace.info["judge_calls"][0]["request"]["messages"]
    return messages[-1]["content"] if messages else ""


def score(task_cls: type, judges: list[dict[str, Any]], rows: list[tuple[Row, str]]) -> list[tuple[Trace, Any]]:
    """Score each (row, reply) with verifiers' ``Task.score``, all concurrently; (trace, error or None) each."""
    config = vf.TaskConfig(judges=judges) if judges else vf.TaskConfig()

    async def one(row: Row, reply: str) -> tuple[Trace, Any]:
        trace = trace_of(row, reply)
        try:
            await task_cls(row, config).score(trace)
        except Exception as e:  # noqa: BLE001 - the failure signal is what is asserted
            return trace, e
        return trace, None

    async def all_rows() -> list[tuple[Trace, Any]]:
        return list(await asyncio.gather(*(one(r, reply) for r, reply in rows)))

    return asyncio.run(all_rows())


def test_the_pinned_verifiers_and_the_plugin_id_resolves_to_the_judge():
    pinned = re.search(r"^verifiers==(\S+)", (REPO / "requirements" / "frameworks.txt").read_text(), re.M)
    assert pinned and importlib.metadata.version("verifiers") == pinned.group(1) == "0.4.0"
    assert judge_class("prom-reward") is PrometheusVerifiersJudge
    assert vf.TaskConfig(judges=[scripted(["[RESULT] 3"])]).judges[0].__class__ is PrometheusVerifiersJudgeConfig


@pytest.mark.parametrize(
    ("outputs", "more", "want"),
    [
        (["Right. [RESULT] 5"], {}, 5.0),
        (["Right. [RESULT] 5"], {"reward": {"normalize": "unit"}}, 1.0),
        (["Half. [RESULT] 3"], {"reward": {"normalize": "symmetric"}}, 0.0),
        (["Right. [RESULT] 4"], {"name": "quality", "weight": 0.5}, 4.0),
    ],
)
def test_a_plugged_judge_scores_through_task_score(outputs, more, want):
    [(trace, error)] = score(Plain, [scripted(outputs, **more)], [(Row(prompt="2+2?"), "4")])
    key = more.get("name", "prom-reward")
    assert error is None and trace.rewards[key].score == want
    assert trace.rewards[key].weight == more.get("weight", 1.0)
    [call] = trace.info["judge_calls"]
    assert call["name"] == key and call["response"]["message"]["content"] == outputs[0].split(" [RESULT]")[0]
    assert "2+2?" in call["request"]["messages"][-1]["content"] and call["request"]["format"] == "prometheus2"


def test_expected_scores_come_through():
    top = {"4": math.log(0.25), "5": math.log(0.75)}
    tokens = (TokenLogprobs("Close. [RESULT] ", -0.1, {}), TokenLogprobs("5", top["5"], top))
    out = Completion("Close. [RESULT] 5", tokens)  # P(4) = 0.25, P(5) = 0.75 at the verdict token
    cfg = {"id": "prom-reward", "judge": {"backend": "scripted", "outputs": [out]}, "reward": {"score": "expected"}}
    [(trace, error)] = score(Plain, [cfg], [(Row(prompt="2+2?"), "4")])
    assert error is None and trace.rewards["prom-reward"].score == pytest.approx(4.75)


@pytest.mark.parametrize("task_cls", [Plain, OwnReward])
def test_a_judgment_that_could_not_decide_fails_the_rollout_never_a_score(task_cls):
    cfg = scripted(["I cannot say."])
    OwnReward.JUDGE = {k: v for k, v in cfg.items() if k != "id"}
    [(trace, error)] = score(task_cls, [] if task_cls is OwnReward else [cfg], [(Row(prompt="2+2?"), "4")])
    assert isinstance(error, TaskError)  # verifiers' own failure signal for a failed judge or reward
    assert "PromRewardError" in str(error) and "no verdict" in str(error)
    key = "judged" if task_cls is OwnReward else "prom-reward"
    assert trace.rewards[key] is None  # seeded by Task.score, never filled with a stand-in number
    assert trace.info["judge_calls"][0]["response"]["message"]["content"] == ""


def test_a_tasks_own_reward_calls_the_judge():
    OwnReward.JUDGE = scripted(["Exact. [RESULT] 5"], reward={"normalize": "unit"}) | {"id": "prom-reward"}
    [(trace, error)] = score(OwnReward, [], [(Row(prompt="2+2?"), "4")])
    assert error is None and trace.rewards["judged"].score == 1.0
    assert "###Reference Answer" in trace.info["judge_calls"][0]["request"]["messages"][-1]["content"]


def test_per_row_rubrics_reach_the_judge_and_concurrent_rollouts_share_a_batch():
    rows = [
        (Row(prompt="Be kind.", rubric="harmlessness"), "Sure."),
        (Row(prompt="Be right.", rubric=None), "Yes."),  # no row rubric: the reward's
        (Row(prompt="Be brief.", rubric=FIVE), "Ok."),
        (Row(prompt="Be exact.", rubric=THREE), "Ok."),  # 3 levels: prometheus2 cannot grade it, this row fails alone
    ]
    cfg = scripted(["[RESULT] 4"] * 3, rubric_field="rubric", reward={"rubric": "helpfulness"}, batch_window_ms=300)
    out = score(Plain, [cfg], rows)
    assert [e for _, e in out[:3]] == [None] * 3 and [t.rewards["prom-reward"].score for t, _ in out[:3]] == [4.0] * 3
    prompts = {t.task.data.prompt: sent(t) for t, _ in out}
    assert "harm" in prompts["Be kind."].lower() and "helpful" in prompts["Be right."].lower()
    assert "Is it brief?" in prompts["Be brief."]
    trace, error = out[3]
    assert isinstance(error, TaskError) and "prometheus2 grades need 5" in str(error)
    assert trace.rewards["prom-reward"] is None and prompts["Be exact."] == ""  # no prompt: never sent
    [shared] = verifiers_judge._shared.values()
    assert shared.batched.stats.max_batch == 4  # the rollouts' judgments went to the judge as one call


@pytest.mark.parametrize(
    ("bad", "refusal"),
    [
        ({"reward": {"mode": "pairwise_group"}}, "takes mode 'absolute'"),
        ({"reward": {"failure_reward": 0.0}}, "gives no number for a failed judgment"),
        ({"reward": {"score": "often"}}, "score: expected one of"),
        ({"reward": {"format": "selene"}}, "selene"),  # a pairwise-only format cannot grade
        ({"reward": {"format": "flow-judge-3"}}, "flow-judge-3 grades need 3 score descriptions"),
        ({"sampling": {"temperature": 0.3}}, "the judge samples it"),
        ({"judge": {}}, "no judge: set server"),
        # unknown keys: a ConfigError naming them and the valid fields (was a TypeError out of RewardConfig)
        (
            {"reward": {"rubrik": "honesty"}},
            r"reward: unknown RewardConfig field\(s\) \['rubrik'\] \(closest: rubrik -> rubric\); fix: give Re",
        ),
        (
            {"reward": {"outage": {"budget": 5}}},
            r"reward.outage: unknown OutagePolicy field\(s\) \['budget'\].*valid: .*budget_s",
        ),
        ({"reward": {"outage": {"budget_s": math.nan}}}, "budget_s: expected seconds >= 0, got nan"),
        ({"reward": {"reference_answer": 4}}, "reference_answer: expected a string or None, got 4"),
    ],
)
def test_a_misconfigured_judge_is_refused_when_the_task_config_is_read(bad, refusal):
    with pytest.raises(ValueError, match=refusal):
        vf.TaskConfig(judges=[scripted(["[RESULT] 4"]) | bad])


@pytest.mark.parametrize("name", [n for n in JUDGE_FORMATS.names() if "absolute" not in JUDGE_FORMATS.get(n).tasks])
def test_a_format_that_cannot_grade_is_told_only_the_formats_that_can(name):
    with pytest.raises(ValueError, match=rf"judge format '{name}' does not judge absolute") as refused:
        vf.TaskConfig(judges=[scripted(["[RESULT] 4"]) | {"reward": {"format": name}}])
    offered = re.search(r"pick a format that does \(([^)]*)\)", str(refused.value))
    assert offered is not None and offered.group(1).split(", ") == [
        n for n in JUDGE_FORMATS.names() if "absolute" in JUDGE_FORMATS.get(n).tasks
    ]


@pytest.mark.parametrize(("answer", "want"), [(4, "4"), (math.nan, None), (math.inf, None)])
def test_a_number_answer_is_its_text_and_a_nan_answer_fails_the_judgment(answer, want):
    """A dataset's missing answer (NaN) is never judged as the reference answer "nan": the judgment fails."""
    from prom_reward.backends.bridge import run_sync

    judge = PrometheusVerifiersJudge(PrometheusVerifiersJudgeConfig(**scripted(["Right. [RESULT] 4"])))
    if want is None:
        with pytest.raises(PromRewardError, match="reference_answer: expected a string, got float"):
            run_sync(lambda: judge.evaluate(question="2+2?", response="4", answer=answer))
    else:
        assert run_sync(lambda: judge.evaluate(question="2+2?", response="4", answer=answer)).parsed == 4.0
        assert (
            f"###Reference Answer (Score 5):\n{want}\n"
            in judge.build_messages(question="q", response="4", answer=answer)[-1].content
        )


def test_build_messages_and_parse_are_the_formats_own():
    judge = PrometheusVerifiersJudge(PrometheusVerifiersJudgeConfig(**scripted([])))
    messages = judge.build_messages(question="Q?", response="R.", answer="A.", rubric="harmlessness")
    assert [m.role for m in messages] == ["system", "user"] and "###Reference Answer" in messages[1].content
    assert "\nA.\n" in messages[1].content
    assert judge.parse(vf.JudgeResponse(text="Fine. [RESULT] 2")) == 2.0
    with pytest.raises(PromRewardError, match="no verdict"):
        judge.parse(vf.JudgeResponse(text="Fine."))
    refusal = r"judge field\(s\) \['answr'\] \(closest: answr -> answer\).*valid: question, response, answer, rubric"
    with pytest.raises(PromRewardError, match=refusal):
        judge.build_messages(question="Q?", response="R.", answr="A.")


def test_another_judge_format_through_a_real_http_judge():
    judge = StandInJudge({"good": 5, "fair": 1}, default=3).start()  # 1..5, mapped onto flow-judge-3's 1..3
    try:
        cfg = {"id": "prom-reward", "server": [judge.url], "model": judge.model, "judge": {"max_retries": 0}}
        cfg["reward"] = {"format": "flow-judge-3", "rubric": THREE}
        out = score(Plain, [cfg], [(Row(prompt="q"), "good one"), (Row(prompt="q"), "fair one")])
    finally:
        judge.stop()
    assert [t.rewards["prom-reward"].score for t, _ in out] == [3.0, 1.0]
    assert out[0][0].info["judge_calls"][0]["request"]["format"] == "flow-judge-3"


def test_a_judge_serving_another_model_fails_at_start():
    judge = StandInJudge().start()
    try:
        cfg = PrometheusVerifiersJudgeConfig(server=[judge.url], model="not-served")
        with pytest.raises(JudgeConfigError, match="does not serve the model 'not-served'"):
            PrometheusVerifiersJudge(cfg)
    finally:
        judge.stop()


@pytest.mark.parametrize(
    ("refuse", "down_for", "reward", "cause"),
    [
        (404, 0.0, {}, JudgeConfigError),  # a wrong route (the URL lacks /v1): the canary, before any score
        (None, None, {"outage": {"budget_s": 1.0, "on_exhausted": "raise"}}, JudgeUnavailableError),
        (None, None, {"outage": {"budget_s": 1.0, "on_exhausted": "fail"}}, PromRewardError),
    ],
)
def test_a_misconfigured_or_unreachable_judge_fails_the_rollout(refuse, down_for, reward, cause):
    judge = StandInJudge(refuse=refuse, down_for=down_for).start()
    try:
        cfg = {"id": "prom-reward", "server": [judge.url], "judge": {"max_retries": 0, "timeout": 2}, "reward": reward}
        [(trace, error)] = score(Plain, [cfg], [(Row(prompt="q"), "good")])
    finally:
        judge.stop()
    assert isinstance(error, TaskError) and isinstance(error.__cause__, cause), repr(error)
    assert trace.rewards["prom-reward"] is None


@pytest.mark.integration
def test_end_to_end_against_the_real_vllm_server(smollm2_server):
    """SmolLM2 behind the real vLLM server (the session fixture): greedy, with its verdicts forced where it
    writes none, it grades; cut at one token and never forced, it cannot decide and the rollout fails."""
    judge = {"max_retries": 0, "force_verdict": "always", "sampling": {"max_tokens": 12, "temperature": 0.0}}
    cfg = {"id": "prom-reward", "server": [smollm2_server], "judge": judge, "batch_window_ms": 300}
    rows = [(Row(prompt="What is 2+2?"), "4"), (Row(prompt="Name a colour."), "Blue.")]
    out = score(Plain, [cfg], rows)
    assert [e for _, e in out] == [None, None]
    assert all(t.rewards["prom-reward"].score in (1.0, 2.0, 3.0, 4.0, 5.0) for t, _ in out)
    [shared] = verifiers_judge._shared.values()
    assert shared.batched.stats.max_batch == 2
    verifiers_judge.reset()
    cut = {"max_retries": 0, "force_verdict": "never", "sampling": {"max_tokens": 1}}
    [(trace, error)] = score(Plain, [cfg | {"judge": cut}], rows[:1])
    assert isinstance(error, TaskError) and "no verdict" in str(error) and trace.rewards["prom-reward"] is None


def test_the_docs_table_lists_the_judges_own_fields_with_their_defaults():
    text = (REPO / "docs" / "verifiers.md").read_text().split("| field | default | meaning |", 1)[1]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, re.M))
    declared = set(PrometheusVerifiersJudgeConfig.__annotations__) - {"id"}  # its own, and model (its default)
    own = {n: f for n, f in PrometheusVerifiersJudgeConfig.model_fields.items() if n in declared}
    assert set(rows) == set(own)
    for name, field in own.items():
        default = field.get_default(call_default_factory=True)
        if default is None:
            shown = "unset"
        elif isinstance(default, float):
            shown = f"`{default:g}`"
        else:
            shown = f"`{json.dumps(default) if default == '' else default}`"
        assert rows[name].strip() == shown, (name, rows[name])


def test_a_key_given_in_the_judge_config_reaches_the_start_up(monkeypatch):
    """Issue 44: ``judge={"api_key": ...}`` failed the start-up check (``GET /models`` asked with the environment's
    key only)."""
    monkeypatch.delenv("PROM_REWARD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stand_in = StandInJudge({"good": 5}, api_key="sekret").start()
    try:
        config = PrometheusVerifiersJudgeConfig(server=[stand_in.url], judge={"api_key": "sekret"})
        assert verifiers_judge.shared_reward(config).reward.judge_server().api_key == "sekret"
    finally:
        stand_in.stop()
    assert stand_in.keys and set(stand_in.keys) == {"Bearer sekret"}
