"""PrometheusReward logic, exactly, on the scripted backend (trainers: test_reward_trl.py)."""

from __future__ import annotations

import asyncio
import math
import pickle
import re

import pytest

from prom_reward import ConfigError, InputError, PrometheusJudge
from prom_reward.backends.base import Completion, GenerationRequest, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.rewards.config import RewardConfig, normalize_value
from prom_reward.rewards.modes import bradley_terry
from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward
from prom_reward.rewards.samples import RewardSample


def by_response(table: dict[str, str], default: str = "rambling without verdict"):
    """A scripted judge whose output depends on the response text in the prompt."""

    def respond(req: GenerationRequest, i: int) -> str:
        for key, out in table.items():
            if f"###Response to evaluate:\n{key}\n" in req.user:
                return out
        return default

    return respond


def pair_judge(strength: dict[str, int]):
    """A scripted pairwise judge preferring the response with the higher strength (ties: A)."""

    def respond(req: GenerationRequest, i: int) -> str:
        a = req.user.split("###Response A:\n")[1].split("\n\n###Response B:")[0]
        b = req.user.split("###Response B:\n")[1].split("\n\n###")[0]
        return "[RESULT] A" if strength[a] >= strength[b] else "[RESULT] B"

    return respond


def test_absolute_sample_rewards_and_none_for_failures():
    judge = PrometheusJudge(
        backend=ScriptedBackend(respond=by_response({"good": "ok [RESULT] 5", "meh": "[RESULT] 2"})), max_retries=1
    )
    reward = PrometheusReward(judge)
    assert reward(["q", "q", "q"], ["good", "meh", "broken"]) == [5.0, 2.0, None]
    assert reward.last_metrics["abstain_rate"] == pytest.approx(1 / 3)
    assert reward.last_metrics["parse_failure_rate"] == pytest.approx(2 / 4)


def test_identical_items_are_judged_once():
    backend = ScriptedBackend(respond=by_response({"same": "[RESULT] 4"}))
    reward = PrometheusReward(PrometheusJudge(backend=backend))
    assert reward(["q"] * 4, ["same"] * 4) == [4.0] * 4
    assert len(backend.calls) == 1 and len(backend.calls[0]) == 1


def test_mean_mode_uses_k_samples():
    backend = ScriptedBackend(outputs=["[RESULT] 3", "[RESULT] 4", "[RESULT] 5"])
    reward = PrometheusReward(PrometheusJudge(backend=backend), score="mean", num_samples=3)
    assert reward(["q"], ["r"]) == [4.0] and backend.calls[0][0].n == 3


def test_expected_mode_reads_logprobs():
    top = {"4": math.log(0.5), "5": math.log(0.5)}
    out = Completion("x [RESULT] 4", (TokenLogprobs("x [RESULT] ", -0.1, {}), TokenLogprobs("4", top["4"], top)))
    backend = ScriptedBackend(outputs=[out])
    reward = PrometheusReward(PrometheusJudge(backend=backend), score="expected")
    assert reward(["q"], ["r"]) == [pytest.approx(4.5)]
    assert backend.calls[0][0].sampling.logprobs == 20


@pytest.mark.parametrize("how, want", [(None, 5.0), ("unit", 1.0), ("symmetric", 1.0)])
def test_normalisation(how, want):
    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=["[RESULT] 5"])), normalize=how)
    assert reward(["q"], ["r"]) == [want]
    assert normalize_value(3.0, "grade", "symmetric") == 0.0 and normalize_value(-1.0, "sign", "unit") == 0.0


def test_rows_columns_override_defaults_and_conversational_layout():
    backend = ScriptedBackend(outputs=["[RESULT] 3", "[RESULT] 4"])
    reward = PrometheusReward(PrometheusJudge(backend=backend))
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}]] * 2
    completions = [[{"role": "assistant", "content": "Paris."}], [{"role": "assistant", "content": "Lyon."}]]
    rewards = reward(
        prompts,
        completions,
        rubric=["honesty", {"criteria": "Is it short?"} | {f"score{i}_description": f"level {i}" for i in range(1, 6)}],
        reference_answer=["Paris", None],
    )
    assert rewards == [3.0, 4.0]
    first, second = backend.calls[0]
    assert "###The instruction to evaluate:\nCapital of France?\n" in first.user
    assert (
        "###Response to evaluate:\nParis.\n" in first.user and "###Reference Answer (Score 5):\nParis\n" in first.user
    )
    assert "[Is it short?]" in second.user and "Reference Answer" not in second.user


def test_instruction_column_replaces_prompt():
    backend = ScriptedBackend(outputs=["[RESULT] 3"])
    PrometheusReward(PrometheusJudge(backend=backend))(["<chat template junk>"], ["r"], instruction=["Real task"])
    assert "###The instruction to evaluate:\nReal task\n" in backend.calls[0][0].user


def test_pairwise_reference_probability_and_sign():
    strength = {"great": 3, "baseline": 2, "poor": 1}
    for kind, want in (("sign", [1.0, -1.0]), ("probability", [1.0, 0.0])):
        reward = PrometheusReward(
            PrometheusJudge(backend=ScriptedBackend(respond=pair_judge(strength))),
            mode="pairwise_reference",
            pairwise_reward=kind,
        )
        assert reward(["q", "q"], ["great", "poor"], baseline=["baseline", "baseline"]) == want
        assert reward.last_metrics["swap_agreement"] == 1.0


def test_pairwise_reference_needs_baseline_column():
    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=[])), mode="pairwise_reference")
    with pytest.raises(InputError, match="'baseline'"):
        reward(["q"], ["r"])


def test_pairwise_group_round_robin_win_rate_and_bradley_terry():
    strength = {"a": 3, "b": 2, "c": 1, "x": 1, "y": 2}
    backend = ScriptedBackend(respond=pair_judge(strength))
    reward = PrometheusReward(PrometheusJudge(backend=backend), mode="pairwise_group")
    prompts = ["p1"] * 3 + ["p2"] * 3
    rewards = reward(prompts, ["a", "b", "c", "x", "y", "y"])
    assert rewards[:3] == [1.0, 0.5, 0.0]
    assert rewards[3:] == [0.0, 1.0, 1.0]  # duplicate "y" judged once, same reward
    assert len(backend.calls[0]) == 2 * (3 + 1)  # both orders of 3 pairs (p1) + 1 pair (p2)
    bt = PrometheusReward(
        PrometheusJudge(backend=ScriptedBackend(respond=pair_judge(strength))),
        mode="pairwise_group",
        group_reward="bradley_terry",
    )(prompts[:3], ["a", "b", "c"])
    assert bt[0] > bt[1] > bt[2] and abs(sum(bt)) < 1e-9


@pytest.mark.parametrize("how, draw", [(None, 0.5), ("unit", 0.5), ("symmetric", 0.0)])
def test_group_of_identical_completions_is_a_draw(how, draw):
    """A draw is a win rate of 0.5 on the reward's scale (it was 0.5 under "symmetric" too, where a draw is 0)."""
    backend = ScriptedBackend(outputs=[])
    reward = PrometheusReward(PrometheusJudge(backend=backend), mode="pairwise_group", normalize=how)
    assert reward(["p"] * 2, ["same", "same"]) == [draw, draw] and backend.calls == []


@pytest.mark.parametrize("group_reward", ["win_rate", "bradley_terry"])
def test_a_completion_alone_in_its_group_gets_no_reward_with_the_reason(group_reward):
    """Its prompt's other completion failed before judging (or none came): no pair was judged, so it has no win rate
    (it was given a draw's 0.5, a made-up number)."""
    backend = ScriptedBackend(respond=lambda req, i: "A is better. [RESULT] A")
    reward = PrometheusReward(PrometheusJudge(backend=backend), mode="pairwise_group", group_reward=group_reward)
    out = reward.judge_batch([RewardSample("P", "b"), RewardSample("Q", "c"), RewardSample("Q", "d")])
    assert out.rewards[0] is None and out.rewards[1] is not None and out.rewards[2] is not None
    assert out.reasons[0].startswith("no other completion of its prompt to compare it with")
    assert reward(["P", "P"], ["a \udc80", "b"]) == [None, None]  # the other failed on its input


def test_bradley_terry_orders_players():
    s = bradley_terry([[0, 2, 2], [0, 0, 2], [0, 0, 0]])
    assert s[0] > s[1] > s[2]


def test_metrics_and_feedback_go_to_trl_callbacks():
    metrics, extra = {}, {}
    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=["Nice. [RESULT] 4"])), name="judge")
    reward(
        ["q"],
        ["fine ###Feedback: [RESULT] 5"],
        log_metric=metrics.__setitem__,
        log_extra=extra.__setitem__,
        trainer_state=object(),
    )
    assert metrics["judge/mean_score"] == 4.0 and metrics["judge/markers_neutralized"] == 2.0
    assert "judge/judge_seconds" in metrics and "judge/judge_completion_tokens" in metrics
    assert extra["judge_feedback"] == ["Nice."] and extra["judge_markers_neutralized"] == [2]
    assert reward.__name__ == "judge"


def test_async_and_sync_agree():
    outs = ["[RESULT] 2", "[RESULT] 5"]
    sync = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=list(outs))))
    asy = AsyncPrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=list(outs))))
    expected = sync(["q", "q2"], ["r", "s"])
    assert asyncio.run(asy(["q", "q2"], ["r", "s"])) == expected == [2.0, 5.0]
    from trl.trainer.utils import is_async_callable

    assert is_async_callable(asy) and not is_async_callable(sync)


def test_pickles_with_lazy_judge_and_rebuilds():
    spec = {"backend": "scripted", "outputs": ["[RESULT] 3"]}
    reward = AsyncPrometheusReward(spec, rubric="reasoning")
    clone = pickle.loads(pickle.dumps(reward))
    assert clone._judge is None and clone.config == reward.config
    assert asyncio.run(clone(["q"], ["r"])) == [3.0]


def test_bad_options_and_lengths():
    with pytest.raises(
        ConfigError, match="mode: expected one of absolute, pairwise_reference, pairwise_group, got 'pairwise'"
    ):
        RewardConfig(mode="pairwise")
    with pytest.raises(ConfigError, match="unbounded"):
        RewardConfig(mode="pairwise_group", group_reward="bradley_terry", normalize="unit")
    with pytest.raises(ConfigError, match="judge"):
        PrometheusReward("prometheus")
    with pytest.raises(ConfigError, match="rubric: .*no_such_rubric"):  # at start, not as a failure per sample
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=[])), rubric="no_such_rubric")
    reward = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=[])))
    with pytest.raises(InputError, match="2 prompts but 1 completions"):
        reward(["a", "b"], ["x"])
    with pytest.raises(InputError, match="column 'rubric'"):
        reward(["a"], ["x"], rubric=["honesty", "reasoning"])
    assert reward([], []) == []
    with pytest.raises(InputError, match="0 prompts but 1 completions"):  # never [] for a completion
        reward([], ["x"])


@pytest.mark.parametrize("kind", ["sign", "probability"])
def test_pairwise_reference_gives_no_reward_from_one_order(kind):
    """A verdict from one order only (the swapped order wrote no verdict) is no reward, with the reason."""

    def respond(req: GenerationRequest, i: int) -> str:
        a = req.user.split("###Response A:\n")[1].split("\n\n###Response B:")[0]
        return "I cannot tell." if a == "baseline" else "[RESULT] A"

    reward = PrometheusReward(
        PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0),
        mode="pairwise_reference",
        pairwise_reward=kind,
    )
    out = reward.judge_batch([RewardSample("q", "great", baseline="baseline")])
    assert out.rewards == [None] and out.metrics["abstain_rate"] == 1.0
    assert out.reasons == [
        "order B-A failed: no verdict in 1 sample(s) "
        "(last: prometheus2: no '[RESULT] A or B' verdict at the end of the feedback)"
    ]


class InProcess(ScriptedBackend):
    name = "vllm"  # stands in for an in-process engine (what cannot travel to TRL's child process)


@pytest.mark.parametrize("where", ["judge", "cascade_primary", "cascade_fallback", "none"])
def test_a_reward_holding_an_in_process_engine_refuses_to_pickle(where):
    from prom_reward import PromRewardError
    from prom_reward.experimental import CascadeJudge

    engine = PrometheusJudge(backend=InProcess(outputs=[]))
    plain = PrometheusJudge(backend="scripted", outputs=[])
    judge = {
        "judge": engine,
        "cascade_primary": CascadeJudge(engine, plain, threshold=1.0, indicator="sample_agreement"),
        "cascade_fallback": CascadeJudge(plain, engine, threshold=1.0, indicator="sample_agreement"),
        "none": CascadeJudge(plain, plain, threshold=1.0, indicator="sample_agreement"),
    }[where]
    reward = PrometheusReward(judge)
    if where == "none":
        assert isinstance(pickle.loads(pickle.dumps(reward)).judge, CascadeJudge)
    else:
        with pytest.raises(PromRewardError, match="holds an in-process vLLM engine, which cannot be pickled"):
            pickle.dumps(reward)


CALL = [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]


@pytest.mark.parametrize(
    "completion, want",
    [
        # TRL's tool loop: an assistant turn that only calls tools (no content, or None), the tool's result, the answer
        ([{"role": "assistant", "tool_calls": CALL}, {"role": "tool", "name": "add", "content": "4"}], 5.0),
        ([{"role": "assistant", "content": None, "tool_calls": CALL}, {"role": "tool", "content": "4"}], 5.0),
        ([{"role": "assistant", "content": [{"type": "text", "text": "4"}, {"type": "image"}]}], 4.0),
        ([{"role": "assistant", "content": [{"type": "text", "text": None}]}], "content part 'text' must be text"),
        ([{"role": "assistant", "content": [{"type": "text", "text": 4}]}], "part 'text' must be text, got int"),
        ([{"role": "assistant", "content": None}], "content must be text, got NoneType"),
        ([{"role": "assistant", "content": 4}], "content must be text, got int"),
        ([{"role": "assistant"}], "messages must be dicts with 'role' and 'content'"),
        ({"role": "assistant", "content": "4"}, "completion must be a string or a list of messages, got dict"),
        (None, "completion must be a string or a list of messages, got NoneType"),
    ],
)
def test_an_odd_completion_message_is_judged_or_fails_alone_with_its_reason(completion, want):
    """What TRL hands a reward in conversational data: the odd completion is judged as text (tool calls) or gets
    None with its reason, counted; the good completion beside it is judged in the same call (never a TypeError)."""
    judge = PrometheusJudge(
        backend=ScriptedBackend(respond=by_response({"4": "[RESULT] 4", "\n\n4": "[RESULT] 5"})), max_retries=0
    )
    extra, metrics = {}, {}
    prompt = [{"role": "user", "content": "2+2?"}]
    got = PrometheusReward(judge)(
        [prompt, prompt],
        [[{"role": "assistant", "content": "4"}], completion],
        log_extra=extra.__setitem__,
        log_metric=metrics.__setitem__,
    )
    assert got[0] == 4.0
    if isinstance(want, float):
        assert got[1] == want and metrics["prometheus/failed_samples"] == 0
    else:
        assert got[1] is None and metrics["prometheus/failed_samples"] == 1
        assert want in extra["prometheus_failure_reason"][1] and extra["prometheus_failure_reason"][0] == ""


@pytest.mark.parametrize(
    "options, words",
    [
        ({"reference_answer": 5}, "reference_answer: expected a string or None, got 5"),
        ({"reference_answer": float("nan")}, "reference_answer: expected a string or None, got nan"),
        ({"log_feedback": "no"}, "log_feedback: expected True or False"),
        ({"rubric_column": None}, "rubric_column: expected a non-empty string"),
        ({"reference_column": ""}, "reference_column: expected a non-empty string"),
        ({"instruction_column": 3}, "instruction_column: expected a non-empty string"),
        ({"baseline_column": ["b"]}, "baseline_column: expected a non-empty string"),
        ({"num_samples": True}, "num_samples"),
        ({"overlong_penalty": float("nan")}, "overlong_penalty"),
        ({"failure_reward": float("inf")}, "failure_reward: expected a finite number"),
        ({"failure_reward": 6}, "failure_reward: 6 is above the reward's scale 1..5"),
        ({"failure_reward": 1.5, "normalize": "unit"}, "above the reward's scale 0..1"),
    ],
)
def test_a_wrong_typed_reward_option_is_refused_at_construction(options, words):
    """Refused when the reward is built (TRL builds it before step 1), never a failure on every sample later: a
    non-text default reference answer used to fail each sample alone, all of them, every step."""
    with pytest.raises(ConfigError, match=re.escape(words)):
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=[])), **options)


@pytest.mark.parametrize("config", ["honesty", {"rubric": "honesty"}, RewardConfig()])
def test_a_config_that_is_not_a_reward_config_or_beside_fields_is_refused(config):
    """A rubric given positionally (or a dict) was an AttributeError; a RewardConfig beside fields is ambiguous."""
    options = {"rubric": "honesty"} if isinstance(config, RewardConfig) else {}
    with pytest.raises(ConfigError, match=r"config: expected a RewardConfig and no reward fields beside it, got "):
        PrometheusReward(PrometheusJudge(backend=ScriptedBackend(outputs=[])), config, **options)


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"backend": "scripted", "outputs": ["[RESULT] 3"], "temp": 0}, "unexpected keyword argument 'temp'"),
        ({"backend": "openai"}, "missing 1 required positional argument: 'base_url'"),
    ],
)
def test_judge_options_the_judge_does_not_take_are_a_config_error_naming_them(spec, words):
    """A judge given as options is built on the first call (never at construction: TRL may pickle the reward into
    a child first); an unknown or missing option there is a ConfigError with the fix, not a TypeError."""
    for reward in (PrometheusReward(spec), OnlineDPOJudgeReward(spec)):
        with pytest.raises(ConfigError, match=rf"judge options \[.*\]: .*{re.escape(words)}.*; fix: give"):
            reward(["q", "q"], ["a", "b"])


def test_concurrent_first_calls_build_one_judge(monkeypatch):
    """A judge given as options is built once, however many calls arrive before it exists (JudgedRolloutLoop's
    groups in flight, a server's concurrent batches): each extra build was another engine or HTTP session."""
    import time

    from prom_reward.core.judge import PrometheusJudge as Judge

    built: list[int] = []
    init = Judge.__init__

    def slow_init(self, *args, **kwargs):
        built.append(1)
        time.sleep(0.2)  # the window in which the other calls find no judge yet
        init(self, *args, **kwargs)

    monkeypatch.setattr(Judge, "__init__", slow_init)
    reward = AsyncPrometheusReward({"backend": "scripted", "outputs": ["[RESULT] 3"] * 8})

    async def calls():
        return await asyncio.gather(*(reward([f"q{i}"], ["r"]) for i in range(8)))

    assert asyncio.run(calls()) == [[3.0]] * 8 and len(built) == 1
    clone = pickle.loads(pickle.dumps(reward))  # the lock stays behind; the clone builds its own judge, once
    assert clone._judge is None and asyncio.run(clone(["q"], ["r"])) == [3.0] and len(built) == 2


def test_judge_batch_takes_sampling_and_returns_each_items_judgment_and_failure():
    """What online DPO's tie rounds read: ``sampling`` goes over the judge's own for that batch only, and the
    output holds each item's judgment (``results``) and the judge's failure behind a missing reward (``errors``)."""
    from prom_reward.core.results import Verdict

    backend = ScriptedBackend(respond=lambda req, i: "Biased. [RESULT] A")  # both orders say A: a tie
    judge = PrometheusJudge(backend=backend, sampling={"temperature": 0.0})
    reward = PrometheusReward(judge, mode="pairwise_reference")
    samples = [RewardSample("Q?", "a", baseline="b"), RewardSample("Q?", None, baseline="b")]
    out = reward.judge_batch(samples, sampling={"temperature": 1.0})
    assert [r.sampling.temperature for r in backend.calls[0]] == [1.0, 1.0]  # one pair, both orders
    v = out.results[0]
    assert isinstance(v, Verdict) and v.winner is None and v.tie and v.p_a == 0.5 and out.rewards[0] == 0.5
    assert out.results[1] is None and out.rewards[1] is None and "NoneType" in out.reasons[1]
    reward.judge_batch(samples[:1])
    assert backend.calls[1][0].sampling.temperature == 0.0  # the judge's own again

    mute = PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=lambda req, i: "Hmm."), max_retries=0))
    out = mute.judge_batch([RewardSample("Q?", "a")])
    assert out.rewards == [None] and out.errors[0] is not None and out.errors[0].kind == "output"
    assert out.reasons == [out.errors[0].reason]
