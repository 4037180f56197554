"""``reward_func`` for OpenRLHF's in-process reward (``--reward.remote_url /path/to/file.py``).

OpenRLHF 0.11 loads that file by path in every rollout actor (``spec_from_file_location``,
a fresh module each time) and calls ``reward_func([query], [prompt], [label])`` from worker
threads (``asyncio.to_thread``), one sample per call. Point it at the shipped
``openrlhf_reward_func.py`` (``prom-reward openrlhf-func-path`` prints its path): that file only
imports ``reward_func`` from here, so the judge and its queue exist once per process however
often the file is loaded. The first call builds one process-wide ``BatchedReward``; concurrent
calls from OpenRLHF's threads wait ``batch_window_ms`` for each other and are judged as one batch.

Configuration, read once on the first call (environment variables override the YAML file):

- ``PROM_REWARD_CONFIG``: a YAML file with any of the keys below in lower case without the
  prefix (``judge_url``, ``failure_reward``, ...).
- ``PROM_REWARD_JUDGE_URL``: comma-separated OpenAI-compatible judge URLs, or
  ``PROM_REWARD_JUDGE_MODEL``: a model for an in-process vLLM judge (one per rollout actor!).
- ``PROM_REWARD_FAILURE_REWARD``: required, a number or ``min``.
- ``PROM_REWARD_RUBRIC`` (helpfulness), ``PROM_REWARD_MODE`` (absolute | pairwise_group),
  ``PROM_REWARD_GROUP_SIZE`` (pairwise_group: ``--rollout.n_samples_per_prompt``),
  ``PROM_REWARD_GROUP_WAIT_S`` (60),
  ``PROM_REWARD_NORMALIZE`` (unit | symmetric), ``PROM_REWARD_MAX_TOKENS``,
  ``PROM_REWARD_BATCH_WINDOW_MS`` (50), ``PROM_REWARD_MAX_BATCH_SIZE`` (256),
  ``PROM_REWARD_TIMEOUT`` (170 s; then the sample fails), ``PROM_REWARD_STRIP`` (comma-separated).

A judge call that fails (backend down) fails its samples with the reason instead of raising:
OpenRLHF would only log the exception and keep a sample without a reward. ``configure(reward,
failure_reward=...)`` installs a ready ``PrometheusReward`` instead
(tests, custom judges); ``reset()`` drops the process-wide state.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.rewards.reward import PrometheusReward
    >>> _ = configure(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"])),
    ...               failure_reward="min")
    >>> out = reward_func(["Q: hi? A: hello"], ["Q: hi? A:"], [None])
    >>> out["rewards"], out["extra_logs"]["judge_failed"]
    ([4.0], [0.0])
    >>> reset()
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy
from prom_reward.integrations.openrlhf_inputs import drop_invalid, make_jobs, reward_dict, unjudged

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_state: "_State | None" = None


@dataclass(frozen=True)
class FuncConfig:
    """The ``reward_func`` settings (from ``PROM_REWARD_*`` variables and/or ``PROM_REWARD_CONFIG``)."""

    failure_reward: Any
    judge_url: tuple[str, ...] = ()
    judge_model: str | None = None
    rubric: Any = "helpfulness"
    mode: str = "absolute"
    group_size: int | None = None
    group_wait_s: float = 60.0
    normalize: str | None = None
    max_tokens: int | None = None
    batch_window_ms: float = 50.0
    max_batch_size: int = 256
    timeout: float = 170.0
    strip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_reward", FailurePolicy(self.failure_reward))
        for name in ("judge_url", "strip"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            object.__setattr__(self, name, tuple(value or ()))
        if bool(self.judge_url) == bool(self.judge_model):
            raise ConfigError("reward_func: set exactly one of PROM_REWARD_JUDGE_URL (comma-separated "
                              "OpenAI-compatible judge URLs) and PROM_REWARD_JUDGE_MODEL (in-process vLLM judge), "
                              f"got judge_url={self.judge_url!r}, judge_model={self.judge_model!r}")
        for name, kind in (("group_size", int), ("max_tokens", int), ("max_batch_size", int),
                           ("batch_window_ms", float), ("timeout", float), ("group_wait_s", float)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(value))
                except (TypeError, ValueError):
                    raise ConfigError(f"reward_func: {name}: expected {kind.__name__}, got {value!r}") from None
        if self.normalize == "":
            object.__setattr__(self, "normalize", None)

    @classmethod
    def from_env(cls, env: Any = None) -> "FuncConfig":
        """Read ``PROM_REWARD_CONFIG`` (YAML) then the ``PROM_REWARD_*`` variables (which win)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        path = env.get("PROM_REWARD_CONFIG")
        if path:
            import yaml

            loaded = yaml.safe_load(Path(path).read_text()) or {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path}: expected a YAML mapping of reward_func settings, got "
                                  f"{type(loaded).__name__}")
            values.update(loaded)
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; valid keys: {sorted(names)}")
        for name in names:
            if f"PROM_REWARD_{name.upper()}" in env:
                values[name] = env[f"PROM_REWARD_{name.upper()}"]
        if values.get("failure_reward") in (None, ""):
            raise ConfigError(
                "reward_func: PROM_REWARD_FAILURE_REWARD is not set. OpenRLHF needs a number for every sample, also "
                "where the judge gave no verdict: set it to a number on your reward scale or 'min' (the lowest reward "
                "of the scale); such samples are flagged judge_failed=1 and counted either way")
        return cls(**values)

    def build(self) -> Any:
        """The ``PrometheusReward`` these settings describe."""
        from prom_reward.core.judge import PrometheusJudge
        from prom_reward.rewards.reward import PrometheusReward

        sampling = {"max_tokens": self.max_tokens} if self.max_tokens else None
        if self.judge_url:
            judge = PrometheusJudge(backend="openai", base_url=list(self.judge_url), sampling=sampling)
        else:
            judge = PrometheusJudge(model=self.judge_model, backend="vllm", sampling=sampling)
        return PrometheusReward(judge, rubric=self.rubric, mode=self.mode, normalize=self.normalize)


@dataclass
class _State:
    batched: BatchedReward
    policy: FailurePolicy
    config: Any
    timeout: float
    strip: tuple[str, ...]


def configure(reward: Any, *, failure_reward: Any, batch_window_ms: float = 50.0, max_batch_size: int = 256,
              group_size: int | None = None, group_wait_s: float = 60.0, timeout: float = 170.0,
              strip: Sequence[str] = ()) -> BatchedReward:
    """Install ``reward`` (a ``PrometheusReward``) as the process-wide judge of ``reward_func``; returns its queue."""
    global _state
    new = _new_state(reward, FailurePolicy(failure_reward), batch_window_ms=batch_window_ms,
                     max_batch_size=max_batch_size, group_size=group_size, group_wait_s=group_wait_s,
                     timeout=timeout, strip=strip)
    with _lock:
        old, _state = _state, new
    if old is not None:
        old.batched.close()
    return new.batched


def _new_state(reward: Any, policy: FailurePolicy, *, batch_window_ms: float, max_batch_size: int,
               group_size: int | None, group_wait_s: float, timeout: float, strip: Sequence[str]) -> _State:
    """The process-wide state for ``reward``: its batched queue and the settings ``reward_func`` reads."""
    batched = BatchedReward(reward, max_wait_s=batch_window_ms / 1000, max_batch_size=max_batch_size,
                            group_size=group_size, group_wait_s=group_wait_s)
    return _State(batched, policy, reward.config, float(timeout), tuple(strip))


def reset() -> None:
    """Drop the process-wide judge (the next call configures a new one)."""
    global _state
    with _lock:
        old, _state = _state, None
    if old is not None:
        old.batched.close()


def batched_reward() -> BatchedReward:
    """The process-wide ``BatchedReward`` (built from the environment on first use)."""
    return _get().batched


def _get() -> _State:
    global _state
    with _lock:
        if _state is None:
            try:
                cfg = FuncConfig.from_env()
                _state = _new_state(cfg.build(), cfg.failure_reward, batch_window_ms=cfg.batch_window_ms,
                                    max_batch_size=cfg.max_batch_size, group_size=cfg.group_size,
                                    group_wait_s=cfg.group_wait_s, timeout=cfg.timeout, strip=cfg.strip)
            except PromRewardError as e:  # OpenRLHF logs reward_func errors at INFO only: say it loudly
                logger.error("prom-reward reward_func is not configured: %s", e)
                raise
            logger.info("prom-reward reward_func ready (mode %s, failure reward %s)", cfg.mode,
                        cfg.failure_reward.value)
        return _state


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """OpenRLHF's ``reward_func``: ``{"rewards", "scores", "extra_logs", "judge_failures", "failure_reasons"}``."""
    state = _get()
    keys = state.batched.extra_log_keys
    jobs, reasons, _ = make_jobs(list(queries), list(prompts), None if labels is None else list(labels), state.strip)
    drop_invalid(state.batched, jobs, reasons)
    live = [j for j in jobs if j is not None]
    try:
        judged = state.batched.score(live, timeout=state.timeout) if live else []
    except DeadlineExceeded as e:
        logger.warning("%d sample(s) failed on the deadline: %s", len(live), e)
        judged = [unjudged(str(e), keys) for _ in live]
    except PromRewardError as e:  # judge backend down: a raise here would leave OpenRLHF a sample without reward
        logger.error("judge call failed, %d sample(s) get the failure reward: %s", len(live), e)
        judged = [unjudged(f"the judge call failed: {e}", keys) for _ in live]
    it = iter(judged)
    results = [next(it) if j is not None else unjudged(r or "", keys) for j, r in zip(jobs, reasons)]
    out = reward_dict(results, state.policy, state.config, keys)
    if out["judge_failures"]:
        logger.warning("%d of %d sample(s) failed and got the failure reward (reason: %s)", out["judge_failures"],
                       len(results), next(r for r in out["failure_reasons"] if r))
    return out


def reward_func_path() -> str:
    """The file to give OpenRLHF as ``--reward.remote_url`` (it only imports ``reward_func`` from here).

    >>> reward_func_path().endswith("openrlhf_reward_func.py")
    True
    """
    return str(Path(__file__).with_name("openrlhf_reward_func.py"))
