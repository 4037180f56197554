"""verl 0.9's custom reward function (``reward.custom_reward_function.path=pkg://prom_reward.integrations.verl``,
``name=compute_score``): concurrent calls meet in a per-process ``BatchedReward`` (docs/verl.md)."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from prom_reward.errors import InputError
from prom_reward.integrations.batched_reward import SampleOutcome, SharedReward, SharedRewards
from prom_reward.integrations.openrlhf_func import reference_text
from prom_reward.integrations.settings import RewardSettings
from prom_reward.rewards.samples import RewardSample
from prom_reward.rewards.startup import check_judge

logger = logging.getLogger(__name__)

_VERL_KWARGS = {"num_turns", "rollout_reward_scores", "reward_router_address", "reward_model_tokenizer"}

_lock = threading.Lock()
_shared = SharedRewards()
_configured: dict[str, Any] = {}
stats: dict[str, int] = {"items": 0, "failures": 0}
"""Samples scored and failed in this process."""


def configure(reward: Any, failure_reward: Any = None, **settings: Any) -> None:
    """Use ``reward`` (a ``PrometheusReward``) in this process instead of building one from the settings;
    ``failure_reward`` and ``settings`` are ``RewardSettings`` fields, read on the first score."""
    reset()
    with _lock:
        _configured.update(reward=reward, settings={"failure_reward": failure_reward, **settings})


def reset() -> None:
    """Close this process's batched rewards (and the rewards built here), forget ``configure`` and the counts."""
    _shared.reset()
    with _lock:
        _configured.clear()
        stats.update(items=0, failures=0)


def _listed(value: Any) -> Any:
    """``value`` with a numpy array or scalar (what verl's parquet rows hold) as its Python list or number."""
    return value.tolist() if hasattr(value, "tolist") else value


def _sample(st: SharedReward, solution_str: Any, ground_truth: Any, extra_info: Any) -> RewardSample | SampleOutcome:
    """The sample verl's arguments describe, or its failed outcome when it cannot be judged."""
    info = extra_info if isinstance(extra_info, dict) else {}
    instruction = next((_listed(info[k]) for k in ("question", "prompt") if info.get(k) is not None), None)
    if instruction is None:
        raise InputError(
            f"extra_info has no 'question' or 'prompt' (keys: {sorted(info)}); verl does not pass the "
            "prompt to custom reward functions, so the judge needs the instruction there: add "
            "extra_info['question'] when preparing the verl dataset",
            field="extra_info",
        )
    if not isinstance(solution_str, str):
        return st.batched.unjudged(
            f"solution_str: expected the decoded response text, got {type(solution_str).__name__}; fix: pass the "
            "response as a string (verl's reward loop decodes it)"
        )
    try:
        ref = reference_text(_listed(ground_truth), "ground_truth")
    except InputError as e:
        return st.batched.unjudged(f"{e} (reward_model.ground_truth of this row; None or '' for none)")
    checklist = _listed(info.get("checklist"))  # a list of criteria (docs/checklists.md)
    return RewardSample(instruction, solution_str, reference_answer=ref, rubric=info.get("rubric"), checklist=checklist)


def _fields(st: SharedReward, res: SampleOutcome) -> dict[str, Any]:
    failure = st.settings.failure_reward.value_for(st.settings.reward)
    with _lock:
        stats["items"] += 1
        stats["failures"] += int(res.failed)
        items, failures = stats["items"], stats["failures"]
    if res.failed:
        logger.warning(
            "prom-reward judge failed on a sample (%s); scored it %s (%d of %d failed so far)",
            res.reason,
            failure,
            failures,
            items,
        )
    reward = None if res.reward is None else float(res.reward)
    why = res.reason if res.failed else None
    out = {"score": failure if reward is None else reward, "judge_reward": reward, "judge_failure_reason": why}
    out.update(res.extra_logs())
    if st.batched.reward.config.log_feedback:
        out["judge_feedback"] = res.feedback
    return out


def _prepare(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Any = None,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    **kwargs: Any,
) -> tuple[SharedReward, RewardSample | SampleOutcome]:
    """verl's arguments (its keywords and the ``RewardSettings`` given as ``reward_kwargs``) as this process's
    batched reward (built on first use) and the sample (or its failed outcome); ``reward_model_tokenizer`` tells
    whether the judge's chat template takes a system message."""

    def build() -> SharedReward:
        if _configured:
            reward = _configured["reward"]
            s = RewardSettings.around(reward.config, _configured["settings"])
        else:
            s = RewardSettings.load({k: v for k, v in kwargs.items() if k not in _VERL_KWARGS})
            reward = s.build_reward(reward_router_address, reward_model_tokenizer)
            check_judge(reward.judge_server(), reward=reward, canary=False)
        failure = s.failure_reward.value_for(s.reward)
        logger.info("prom-reward verl judge ready in pid %d: %r, failure reward %s", os.getpid(), reward, failure)
        return SharedReward(s.batched(reward), s, owned=not _configured)

    key = "configured" if _configured else (reward_router_address, repr(sorted(kwargs.items(), key=str)))
    st = _shared.get(key, build)
    return st, _sample(st, solution_str, ground_truth, extra_info)


async def compute_score(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """verl's async custom reward function (``data_source, solution_str, ground_truth, extra_info``, verl's
    keywords): one sample, batched with this process's concurrent calls."""
    st, sample = _prepare(*args, **kwargs)
    timeout = st.settings.request_timeout
    [res] = await st.batched.ascore([sample], timeout=timeout) if isinstance(sample, RewardSample) else [sample]
    return _fields(st, res)


def compute_score_sync(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Blocking form, for verl's ``remote`` reward manager (it rejects coroutine functions)."""
    st, sample = _prepare(*args, **kwargs)
    timeout = st.settings.request_timeout
    [res] = st.batched.score([sample], timeout=timeout) if isinstance(sample, RewardSample) else [sample]
    return _fields(st, res)
