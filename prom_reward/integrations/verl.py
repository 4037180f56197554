"""verl custom reward function: a Prometheus judge as verl 0.9's reward (``reward.custom_reward_function``).

Point verl at the real module (``pkg://``: one module copy, picklable by reference)::

    reward.custom_reward_function.path=pkg://prom_reward.integrations.verl
    reward.custom_reward_function.name=compute_score

verl's reward-loop worker awaits ``compute_score`` once per sample, concurrently; the calls
meet in a per-process ``BatchedReward`` and reach the judge as one batched call. Where verl
serves the judge itself (``reward.reward_model.enable=True``), it passes
``reward_router_address`` ("ip:port" of its router in front of the vLLM replicas) and the
judge goes through ``http://<address>/v1/chat/completions``: vLLM applies the judge's own chat
template (system prompt folded into the user turn where the template has no system role,
the Prometheus 2 training form). Otherwise ``judge_url`` / ``PROM_REWARD_JUDGE_URL`` names
OpenAI-compatible judge servers (``prom-reward serve``, vLLM).

Settings (first found wins): ``reward.custom_reward_function.reward_kwargs.<name>``, the
environment variable, a YAML file (``config_file`` / ``PROM_REWARD_CONFIG``, keys = names
below, plus ``judge:`` and ``reward:`` dicts of extra ``PrometheusJudge`` /
``PrometheusReward`` options): see ``SETTINGS``. ``failure_reward`` is required: a sample
the judge fails on scores it (a number or ``min``), flagged ``judge_failed=1``, counted and logged.

Each call returns the same keys: ``score``, ``judge_reward`` (None when failed),
``judge_failed`` (0/1) and the batch metrics of ``BatchedReward.extra_log_keys``, plus
``judge_feedback`` when the reward's ``log_feedback`` is on.

Example:
    >>> import asyncio
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.rewards.reward import PrometheusReward
    >>> configure(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"])),
    ...           failure_reward=0.0)
    >>> out = asyncio.run(compute_score("gsm8k", "72", "72", {"question": "How many?"}))
    >>> out["score"], out["judge_failed"], out["judge_feedback"]
    (4.0, 0.0, 'Fine.')
    >>> reset()
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from prom_reward.errors import ConfigError, InputError
from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, JobResult, JudgeJob

logger = logging.getLogger(__name__)

SETTINGS: dict[str, str] = {
    "judge_url": "PROM_REWARD_JUDGE_URL",  # comma-separated .../v1 URLs; overrides verl's router
    "judge_model": "PROM_REWARD_JUDGE_MODEL",  # served model name (default: the server's first model)
    "rubric": "PROM_REWARD_RUBRIC",
    "mode": "PROM_REWARD_MODE",
    "score": "PROM_REWARD_SCORE",
    "normalize": "PROM_REWARD_NORMALIZE",
    "failure_reward": "PROM_REWARD_FAILURE_REWARD",  # required: a number or "min"
    "group_size": "PROM_REWARD_GROUP_SIZE",  # pairwise_group: actor_rollout_ref.rollout.n
    "batch_window_ms": "PROM_REWARD_BATCH_WINDOW_MS",  # as reward-server --batch-window-ms
    "max_batch_size": "PROM_REWARD_MAX_BATCH_SIZE",
    "timeout": "PROM_REWARD_TIMEOUT",  # seconds a sample may wait for its batch to start
    "config_file": "PROM_REWARD_CONFIG",
}
"""Setting name -> environment variable."""
_DEFAULTS = {"rubric": "helpfulness", "mode": "absolute", "score": "sample", "batch_window_ms": 50.0,
             "max_batch_size": 512}
_NUMBERS = {"group_size": int, "batch_window_ms": float, "max_batch_size": int, "timeout": float}
_VERL_KWARGS = {"num_turns", "rollout_reward_scores", "reward_router_address", "reward_model_tokenizer"}

_lock = threading.Lock()
_states: dict[Any, "_State"] = {}
_configured: dict[str, Any] = {}
stats: dict[str, int] = {"items": 0, "failures": 0}
"""Running counts in this process: samples scored and samples the judge failed on."""


@dataclass
class _State:
    pid: int
    batched: BatchedReward
    failure: float
    timeout: float | None


def configure(reward: Any, failure_reward: Any = None, **batching: Any) -> None:
    """Use ``reward`` (a ``PrometheusReward``) in this process instead of the settings.

    ``failure_reward`` (a number or ``"min"``; None: the ``failure_reward`` setting) is
    required by the first score; ``batching``: ``batch_window_ms``, ``max_batch_size``,
    ``group_size``, ``timeout``.

    >>> configure(object(), failure_reward=0.0); reset()
    """
    reset()
    with _lock:
        _configured.update(reward=reward, failure_reward=failure_reward, batching=batching)


def reset() -> None:
    """Close this process's batched rewards, forget ``configure`` and the counts.

    >>> reset()
    """
    with _lock:
        states = list(_states.values())
        _states.clear()
        _configured.clear()
        stats.update(items=0, failures=0)
    for s in states:
        s.batched.close()


def settings(kwargs: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The effective settings: ``kwargs`` (verl's reward_kwargs), then ``env``, then the YAML file.

    >>> settings({"rubric": "honesty"}, env={"PROM_REWARD_FAILURE_REWARD": "min"})["failure_reward"]
    'min'
    """
    kwargs = {k: v for k, v in (kwargs or {}).items() if k not in _VERL_KWARGS}
    unknown = sorted(set(kwargs) - set(SETTINGS) - {"judge", "reward"})
    if unknown:
        raise ConfigError(f"reward_kwargs: unknown setting(s) {unknown}; expected some of {sorted(SETTINGS)} "
                          "(plus 'judge' and 'reward' option dicts)")
    env = dict(os.environ if env is None else env)
    out: dict[str, Any] = {}
    for name, var in SETTINGS.items():
        if kwargs.get(name) is not None:
            out[name] = kwargs[name]
        elif env.get(var, "").strip():
            out[name] = env[var].strip()
    for name in ("judge", "reward"):
        if kwargs.get(name) is not None:
            out[name] = dict(kwargs[name])
    if out.get("config_file"):
        for name, value in _read_yaml(str(out["config_file"])).items():
            out.setdefault(name, value)
    for name, value in _DEFAULTS.items():
        out.setdefault(name, value)
    for name, kind in _NUMBERS.items():
        if out.get(name) is not None:
            try:
                out[name] = kind(out[name])
            except (TypeError, ValueError):
                raise ConfigError(f"{name} ({SETTINGS[name]}): expected {kind.__name__}, got {out[name]!r}") from None
    return out


def _read_yaml(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"config_file: cannot read {path!r} ({e}); fix PROM_REWARD_CONFIG / reward_kwargs") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config_file {path!r}: expected a mapping of settings, got {type(data).__name__}")
    unknown = sorted(set(data) - set(SETTINGS) - {"judge", "reward"})
    if unknown:
        raise ConfigError(f"config_file {path!r}: unknown key(s) {unknown}; expected some of {sorted(SETTINGS)}, "
                          "'judge', 'reward'")
    return data


def reward_from_settings(s: dict[str, Any], reward_router_address: str | None = None,
                         reward_model_tokenizer: Any = None) -> Any:
    """The ``PrometheusReward`` that settings ``s`` describe; the judge goes to ``judge_url`` if set,
    else through verl's router at ``reward_router_address``. There, whether the judge's chat
    template takes a system message is read from ``reward_model_tokenizer`` (the judge's own
    tokenizer): verl's router turns vLLM's 400 into a 500, which breaks the ``/tokenize`` probe.

    >>> r = reward_from_settings(settings(env={}), reward_router_address="10.0.0.2:8123")
    >>> r._judge_spec["base_url"]
    ['http://10.0.0.2:8123/v1']
    """
    from prom_reward.rewards.reward import PrometheusReward

    url = s.get("judge_url")
    urls = [u.strip() for u in (url.split(",") if isinstance(url, str) else url or []) if u.strip()]
    via_router = not urls and bool(reward_router_address)
    if via_router:
        urls = [f"http://{reward_router_address}/v1"]
    if not urls:
        raise ConfigError("no judge: verl passed no reward_router_address (reward.reward_model.enable is off) and "
                          "PROM_REWARD_JUDGE_URL / reward_kwargs.judge_url is not set; either let verl serve the "
                          "judge (reward.reward_model.enable=True, model_path=<judge>) or give judge server URLs, "
                          "e.g. http://judge:8000/v1,http://judge:8001/v1")
    judge: dict[str, Any] = {"backend": "openai", "base_url": urls, **dict(s.get("judge") or {})}
    if s.get("judge_model"):
        judge["model"] = s["judge_model"]
    if via_router and reward_model_tokenizer is not None and "system_role" not in judge:
        from prom_reward.format.wire import template_accepts_system

        judge["system_role"] = template_accepts_system(reward_model_tokenizer)
    return PrometheusReward(judge, rubric=s["rubric"], mode=s["mode"], score=s["score"],
                            normalize=s.get("normalize") or None, **dict(s.get("reward") or {}))


def _state(reward_router_address: str | None, kwargs: dict[str, Any], tokenizer: Any = None) -> _State:
    pid = os.getpid()
    key = "configured" if _configured else (reward_router_address, repr(sorted(kwargs.items(), key=str)))
    with _lock:
        st = _states.get(key)
        if st is not None and st.pid == pid:
            return st
        if _configured:
            s = settings({k: v for k, v in _configured["batching"].items()})
            reward, failure = _configured["reward"], _configured["failure_reward"]
            if failure is None:
                failure = s.get("failure_reward")
        else:
            s = settings(kwargs)
            reward, failure = reward_from_settings(s, reward_router_address, tokenizer), s.get("failure_reward")
        policy = FailurePolicy(failure)  # raises (no silent default) when unset
        batched = BatchedReward(reward, max_wait_s=s["batch_window_ms"] / 1000, max_batch_size=s["max_batch_size"],
                                group_size=s.get("group_size"))
        st = _states[key] = _State(pid, batched, policy.value_for(reward.config), s.get("timeout"))
        logger.info("prom-reward verl judge ready in pid %d: %r, failure reward %s", pid, reward, st.failure)
        return st


def _instruction(extra_info: Any) -> Any:
    info = extra_info if isinstance(extra_info, dict) else {}
    for key in ("question", "prompt"):
        if info.get(key) is not None:
            value = info[key]
            return list(value) if hasattr(value, "tolist") else value  # numpy arrays from parquet
    raise InputError(f"extra_info has no 'question' or 'prompt' (keys: {sorted(info)}); verl does not pass the "
                     "prompt to custom reward functions, so the judge needs the instruction there: add "
                     "extra_info['question'] when preparing the verl dataset", field="extra_info")


def _job(solution_str: Any, ground_truth: Any, extra_info: Any) -> JudgeJob:
    info = extra_info if isinstance(extra_info, dict) else {}
    ref = None if ground_truth is None or ground_truth == "" else str(ground_truth)
    return JudgeJob(prompt=_instruction(extra_info), response=str(solution_str), reference_answer=ref,
                    rubric=info.get("rubric"))


def _fields(st: _State, res: JobResult) -> dict[str, Any]:
    with _lock:
        stats["items"] += 1
        stats["failures"] += int(res.failed)
        items, failures = stats["items"], stats["failures"]
    if res.failed:
        logger.warning("prom-reward judge failed on a sample (%s); scored it %s (%d of %d failed so far)",
                       res.reason, st.failure, failures, items)
    out: dict[str, Any] = {"score": st.failure if res.reward is None else float(res.reward),
                           "judge_reward": None if res.reward is None else float(res.reward)}
    out.update(res.extra_logs())
    if st.batched.reward.config.log_feedback:
        out["judge_feedback"] = res.feedback
    return out


async def compute_score(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                        extra_info: Any = None, reward_router_address: str | None = None,
                        reward_model_tokenizer: Any = None, **kwargs: Any) -> dict[str, Any]:
    """verl's async custom reward function: one sample, batched with this process's concurrent calls.

    The judge's server applies the judge's chat template; ``reward_model_tokenizer`` only tells
    whether that template takes a system message.
    """
    st = _state(reward_router_address, kwargs, reward_model_tokenizer)
    [res] = await st.batched.ascore([_job(solution_str, ground_truth, extra_info)], timeout=st.timeout)
    return _fields(st, res)


def compute_score_sync(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                       extra_info: Any = None, reward_router_address: str | None = None,
                       reward_model_tokenizer: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Blocking form, for verl's ``remote`` reward manager (it rejects coroutine functions).

    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.rewards.reward import PrometheusReward
    >>> configure(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 2"])), "min")
    >>> compute_score_sync("d", "r", None, {"question": "q"})["score"]
    2.0
    >>> reset()
    """
    st = _state(reward_router_address, kwargs, reward_model_tokenizer)
    [res] = st.batched.score([_job(solution_str, ground_truth, extra_info)], timeout=st.timeout)
    return _fields(st, res)
