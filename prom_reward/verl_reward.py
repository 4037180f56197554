"""A verl custom reward function that asks a Prometheus judge.

Point verl at this file (``custom_reward_function.path=.../prom_reward/verl_reward.py``)
and name ``compute_score`` (the default ``naive`` reward manager, one item per call) or
``compute_score_batch`` (with ``reward_model.reward_manager=batch``: the whole batch in
one judge call, much faster, and needed for ``PROM_REWARD_MODE=pairwise_group``).

For each item the judge sees the instruction from ``extra_info["question"]`` (else
``extra_info["prompt"]``, a string or a message list), the response ``solution_str``, and
``ground_truth`` as the reference answer (None or "" for none). An item without an
instruction raises ``InputError``: add ``question`` to ``extra_info`` in preprocessing.

Configuration (environment variables, read when the first score is asked for; or call
``configure(reward)`` with a ready ``PrometheusReward``):

- ``PROM_REWARD_JUDGE_URL``: comma-separated OpenAI-compatible base URLs (required).
- ``PROM_REWARD_JUDGE_MODEL``: the served model name (default: whatever the server serves).
- ``PROM_REWARD_RUBRIC`` (default ``helpfulness``), ``PROM_REWARD_MODE`` (``absolute``),
  ``PROM_REWARD_SCORE`` (``sample``), ``PROM_REWARD_NORMALIZE`` (unset, ``unit``, ``symmetric``).
- ``PROM_REWARD_FAILURE_REWARD`` (``0.0``): the score of an item the judge failed on
  (verl needs a number); failures are counted in ``stats`` and logged.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.reward import PrometheusReward
    >>> configure(PrometheusReward(PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"])))
    >>> compute_score("gsm8k", "72", "72", {"question": "How many?"})
    4.0
    >>> reset()
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Sequence

from prom_reward.errors import ConfigError, InputError  # absolute: verl loads this file by path

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"reward": None, "failure_reward": None}
stats: dict[str, int] = {"items": 0, "failures": 0}
"""Running counts: items scored and items the judge failed on."""


def configure(reward: Any, failure_reward: float | None = None) -> None:
    """Use ``reward`` (a ``PrometheusReward``) instead of building one from the environment."""
    with _lock:
        _state["reward"], _state["failure_reward"] = reward, failure_reward


def reset() -> None:
    """Forget the configured reward and the counts (the next call reads the environment again)."""
    with _lock:
        _state["reward"], _state["failure_reward"] = None, None
        stats.update(items=0, failures=0)


def reward_from_env(env: "dict[str, str] | None" = None) -> Any:
    """Build the ``PrometheusReward`` the ``PROM_REWARD_*`` variables describe."""
    from prom_reward.reward import PrometheusReward

    env = dict(os.environ if env is None else env)
    urls = [u.strip() for u in env.get("PROM_REWARD_JUDGE_URL", "").split(",") if u.strip()]
    if not urls:
        raise ConfigError("PROM_REWARD_JUDGE_URL is not set: give the judge server(s) as comma-separated "
                          "OpenAI-compatible base URLs, e.g. http://judge:8000/v1,http://judge:8001/v1")
    judge: dict[str, Any] = {"backend": "openai", "base_url": urls}
    if env.get("PROM_REWARD_JUDGE_MODEL"):
        judge["model"] = env["PROM_REWARD_JUDGE_MODEL"]
    return PrometheusReward(judge, rubric=env.get("PROM_REWARD_RUBRIC") or "helpfulness",
                            mode=env.get("PROM_REWARD_MODE") or "absolute",
                            score=env.get("PROM_REWARD_SCORE") or "sample",
                            normalize=env.get("PROM_REWARD_NORMALIZE") or None)


def _reward_and_failure() -> tuple[Any, float]:
    with _lock:
        if _state["reward"] is None:
            _state["reward"] = reward_from_env()
        failure = _state["failure_reward"]
    if failure is None:
        raw = os.environ.get("PROM_REWARD_FAILURE_REWARD", "0.0")
        try:
            failure = float(raw)
        except ValueError:
            raise ConfigError(f"PROM_REWARD_FAILURE_REWARD: expected a number, got {raw!r}") from None
    return _state["reward"], failure


def _instruction(extra_info: Any, index: int) -> Any:
    info = extra_info if isinstance(extra_info, dict) else {}
    for key in ("question", "prompt"):
        if info.get(key) is not None:
            return info[key]
    raise InputError(f"item {index}: extra_info has no 'question' or 'prompt' (keys: {sorted(info)}); the judge "
                     "needs the instruction: add it to extra_info when preparing the verl dataset",
                     index=index, field="extra_info")


def _reference(ground_truth: Any) -> str | None:
    if ground_truth is None or ground_truth == "":
        return None
    return ground_truth if isinstance(ground_truth, str) else str(ground_truth)


def compute_score_batch(data_sources: Sequence[Any] | None = None, solution_strs: Sequence[str] = (),
                        ground_truths: Sequence[Any] | None = None, extra_infos: Sequence[Any] | None = None,
                        **kwargs: Any) -> list[float]:
    """verl's batched form (``reward_manager=batch``): one float per solution, one judge call."""
    n = len(solution_strs)
    truths = list(ground_truths) if ground_truths is not None else [None] * n
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if len(truths) != n or len(infos) != n:
        raise InputError(f"got {n} solutions, {len(truths)} ground truths and {len(infos)} extra_infos; "
                         "expected one of each per solution")
    if n == 0:
        return []
    prompts = [_instruction(info, i) for i, info in enumerate(infos)]
    refs = [_reference(t) for t in truths]
    reward, failure = _reward_and_failure()
    columns = {reward.config.reference_column: refs} if any(r is not None for r in refs) else {}
    raw = reward(prompts, [str(s) for s in solution_strs], **columns)
    failed = sum(r is None for r in raw)
    with _lock:
        stats["items"] += n
        stats["failures"] += failed
    if failed:
        logger.warning("prom-reward judge failed on %d of %d items (%d of %d so far); scored them %s",
                       failed, n, stats["failures"], stats["items"], failure)
    return [failure if r is None else float(r) for r in raw]


def compute_score(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                  extra_info: Any = None, **kwargs: Any) -> float:
    """verl's per-item form (the default ``naive`` reward manager)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
