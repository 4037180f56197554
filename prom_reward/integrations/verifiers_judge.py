"""``PrometheusVerifiersJudge``: a Prometheus-style judge as a verifiers (0.4) v1 judge, on the reward path (a
process-wide ``BatchedReward``); an undecided judgment raises, verifiers' failure signal (docs/verifiers.md)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

from pydantic import Field, model_validator
from verifiers.v1.configs.judge import JudgeConfig
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.judge import Judge, JudgeResponse, JudgeView, judge_question, judge_response
from verifiers.v1.types import Messages, SystemMessage, UserMessage

from prom_reward.declared import refuse_unknown
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.integrations.batched_reward import BatchedReward, SharedReward, SharedRewards
from prom_reward.integrations.settings import framework_judge
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample
from prom_reward.rewards.startup import check_judge

PLUGIN_ID = "prom-reward"
"""The ``id`` that plugs this judge in ``TaskConfig.judges``."""

_shared = SharedRewards()


class PrometheusVerifiersJudgeConfig(JudgeConfig):
    """The judge's config: verifiers' ``JudgeConfig`` (``id``, ``name``, ``weight``) plus prom-reward's options."""

    id: str = PLUGIN_ID
    model: str = ""
    """With ``server``: the served judge model (empty: the server's first); without: an in-process vLLM judge's."""
    server: list[str] = Field(default_factory=list)
    """OpenAI-compatible judge base URLs (``http://host:port/v1``); verifiers' ``base_url`` is not used."""
    judge: dict[str, Any] = Field(default_factory=dict)
    """More ``PrometheusJudge`` options, e.g. ``{"format": "m-prometheus", "sampling": {"temperature": 0}}``."""
    reward: dict[str, Any] = Field(default_factory=dict)
    """``RewardConfig`` fields (``outage`` as a dict); mode ``absolute`` only."""
    max_tokens: int | None = None
    """The judge's feedback tokens at most (unset: the judge's 1,024)."""
    question_field: str = ""
    """Task field shown to the judge as the instruction; empty: the task's prompt as text."""
    answer_field: str = ""
    """Task field holding a reference answer (a list: one per line); empty: none (or ``reward.reference_answer``)."""
    rubric_field: str = ""
    """Task field holding a per-task rubric (a built-in name, a dict or a file path); empty: ``reward.rubric``."""
    view: JudgeView = "last_reply"
    """How much of the rollout is judged: ``last_reply`` (the final answer) or ``full_trace``."""
    batch_window_ms: float = Field(20.0, ge=0)
    """How long a judgment waits for concurrent ones before its batch goes to the judge."""
    max_batch_size: int = Field(256, gt=0)
    """Judgments per judge call at most."""
    request_timeout: float | None = Field(None, gt=0)
    """Seconds one judgment may take (its outage retries included); unset: no deadline but the outage budget."""

    @model_validator(mode="after")
    def _check(self) -> PrometheusVerifiersJudgeConfig:
        sampling = self.sampling.model_dump(exclude_none=True)
        unused = [name for name, value in (("sampling", sampling), ("prompt", self.prompt)) if value]
        if unused:
            raise ConfigError(
                f"{', '.join(unused)}: the judge format builds the prompt and the judge samples it; fix: give "
                "reward={'format': ...} and judge={'sampling': {...}} instead"
            )
        build_reward(self)  # a bad reward or judge option fails here, when the task config is read
        return self


def build_reward(config: PrometheusVerifiersJudgeConfig) -> PrometheusReward:
    """The ``PrometheusReward`` the config describes (``reward``: ``RewardConfig`` fields, ``outage`` as a dict of
    ``OutagePolicy``'s); its judge is built on first use."""
    fields = dict(config.reward)
    if "failure_reward" in fields:
        raise ConfigError(
            "reward.failure_reward: a verifiers judge gives no number for a failed judgment, it raises (verifiers' "
            "own failure signal); fix: remove failure_reward"
        )
    refuse_unknown(fields, [f.name for f in dataclasses.fields(RewardConfig)], "RewardConfig field", "reward")
    try:
        if isinstance(fields.get("outage"), dict):
            valid = [f.name for f in dataclasses.fields(OutagePolicy)]
            refuse_unknown(fields["outage"], valid, "OutagePolicy field", "outage")
            try:
                fields["outage"] = OutagePolicy(**fields["outage"])
            except ConfigError as e:
                raise e.said_as(f"outage.{e.setting}") from None
        cfg = RewardConfig(**fields)
    except ConfigError as e:
        raise e.said_as(f"reward.{e.setting}") from None
    if cfg.mode != "absolute":
        raise ConfigError(
            f"reward.mode: a verifiers judge scores one trace at a time, so it takes mode 'absolute', got {cfg.mode!r}"
        )
    spec = framework_judge(
        config.judge,
        list(config.server),
        config.model,
        config.max_tokens,
        missing="no judge: set server (OpenAI-compatible judge URLs, e.g. ['http://judge:8000/v1']), model (an "
        "in-process vLLM judge) or judge={'backend': ...}",
    )
    return PrometheusReward(spec, cfg)


def shared_reward(config: PrometheusVerifiersJudgeConfig) -> BatchedReward:
    """This process's batched reward for ``config`` (built, and its judge URLs checked, on first use)."""

    def build() -> SharedReward:
        reward = build_reward(config)
        check_judge(reward.judge_server(), reward=reward, canary=False)
        batched = BatchedReward(reward, max_wait_s=config.batch_window_ms / 1000, max_batch_size=config.max_batch_size)
        return SharedReward(batched, None, owned=True)

    return _shared.get(config.model_dump_json(exclude={"id", "name", "weight"}), build).batched


def reset() -> None:
    """Close this process's batched rewards and their judges."""
    _shared.reset()


class PrometheusVerifiersJudge(Judge[float, PrometheusVerifiersJudgeConfig]):
    """A prom-reward judge for verifiers: ``evaluate(...)`` from a task's ``@reward``, or plugged (``score``)."""

    def __init__(self, config: PrometheusVerifiersJudgeConfig | None = None) -> None:
        super().__init__(config)
        self.batched = shared_reward(self.config)

    @property
    def reward(self) -> PrometheusReward:
        """The reward underneath (shared by every judge of the same config in this process)."""
        return cast(PrometheusReward, self.batched.reward)

    def build_messages(self, **fields: Any) -> Messages:
        """The judge format's prompt for ``question``, ``response``, ``answer`` and ``rubric``, as the reward
        resolves them; raises ``PromRewardError`` for a sample the judge cannot take."""
        [item], [why], _ = self.reward.resolve([_sample(**fields)])
        if item is None:
            raise PromRewardError(f"prom-reward judge cannot take this sample: {why}")
        prompt = self.reward.judge.format.absolute_prompt(
            str(item.instruction), item.response, item.rubric, item.reference_answer
        )
        return ([SystemMessage(content=prompt.system)] if prompt.system else []) + [UserMessage(content=prompt.user)]

    def parse(self, response: JudgeResponse[float]) -> float:
        """The verdict the judge format reads in ``response.text``, on its scale; raises without one."""
        parsed = self.reward.judge.format.parse(response.text, "absolute")
        if parsed.verdict is None:
            raise PromRewardError(f"prom-reward judge output has no verdict: {parsed.reason or 'none found'}")
        return float(parsed.verdict)

    async def evaluate(self, *, trace: Any = None, **fields: Any) -> JudgeResponse[float]:
        """Judge one response (``question``, ``response``; optional ``answer``, ``rubric``), batched with
        concurrent calls, recorded on ``trace``; ``parsed`` is the score, ``text`` the feedback. Raises
        ``PromRewardError`` when the judge could not decide, ``JudgeUnavailableError`` past the outage budget."""
        [out] = await self.batched.ascore([_sample(**fields)], timeout=self.config.request_timeout)
        result = JudgeResponse[float](text=out.feedback or "", parsed=out.reward)
        if trace is not None:
            try:
                messages = [message_to_wire(m) for m in self.build_messages(**fields)]
            except PromRewardError:
                messages = []
            trace.record_judge_call(
                name=self.reward_name,
                request={"model": self.config.model, "format": self.reward.judge.format.name, "messages": messages},
                response=result,
            )
        if out.failed:
            raise PromRewardError(f"prom-reward judge gave no score: {out.reason}")
        return result

    async def score(self, task: Any, trace: Any) -> float:
        """The plugged judge's score of ``trace`` for ``task`` (fields named by the config's ``*_field``)."""
        fields: dict[str, Any] = {
            "question": judge_question(task, self.config.question_field),
            "response": judge_response(trace, self.config.view),
        }
        for name, attr in (("answer", self.config.answer_field), ("rubric", self.config.rubric_field)):
            if attr:
                value = getattr(task, attr, None)
                if value is None and name == "answer":
                    raise PromRewardError(
                        f"prom-reward judge found no {attr!r} field on the task; fix: point answer_field at the "
                        "task's reference-answer field, or leave it empty"
                    )
                fields[name] = "\n".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        result = await self.evaluate(trace=trace, **fields)
        return float(cast(float, result.parsed))


def _sample(
    question: Any = None, response: Any = "", answer: Any = None, rubric: Any = None, **unknown: Any
) -> RewardSample:
    refuse_unknown(unknown, ("question", "response", "answer", "rubric"), "prom-reward judge field")
    if answer is not None and not (isinstance(answer, float) and not math.isfinite(answer)):
        answer = str(answer)  # a number is its text; NaN (a dataset's missing value) fails the sample, never "nan"
    return RewardSample(prompt=question, response=response, reference_answer=answer, rubric=rubric)


__all__ = ["PLUGIN_ID", "PrometheusVerifiersJudge", "PrometheusVerifiersJudgeConfig", "reset"]
