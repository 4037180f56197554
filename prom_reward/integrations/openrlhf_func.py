"""OpenRLHF's reward: its inputs -> ``RewardSample``s and ``SampleOutcome``s -> its reward dict (a sample whose
input cannot be used fails alone), shared with the reward server; and its in-process ``reward_func``
(``--reward.remote_url /path/to/openrlhf_reward_func.py``): one process-wide ``BatchedReward``, built on the first
call from ``RewardSettings`` or installed by ``configure``."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prom_reward.core.items import check_text
from prom_reward.errors import InputError, PromRewardError
from prom_reward.format.columns import find_column
from prom_reward.integrations.batched_reward import (
    BatchedReward,
    FailurePolicy,
    SampleOutcome,
    SharedReward,
    SharedRewards,
)
from prom_reward.integrations.batching import DeadlineExceeded
from prom_reward.integrations.settings import RewardSettings, where
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.samples import SAMPLE_COLUMNS, RewardSample
from prom_reward.rewards.startup import check_judge

MIN_OVERLAP = 8
"""Characters of prompt suffix a left-truncated query must start with to be split."""
LABEL_COLUMNS = {name: option for name, option in SAMPLE_COLUMNS.items() if name != "baseline"}
"""The ``RewardSample`` fields a dict label sets, and the column setting naming each one's key."""
_DEFAULT = RewardConfig()
logger = logging.getLogger(__name__)
_shared = SharedRewards()
_ignored_logged: set[frozenset[str]] = set()


def split_query(query: str, prompt: str, strip: Sequence[str] = ()) -> tuple[str, bool]:
    """``(response, truncated)`` from an OpenRLHF query (``truncated``: it held only a suffix of the prompt, at
    least ``MIN_OVERLAP`` characters, else ``InputError``), the ``strip`` strings removed from its end."""
    for name, value in (("query", query), ("prompt", prompt)):
        check_text(value, None, name)
    if query.startswith(prompt):
        response, truncated = query[len(prompt) :], False
    else:
        need = min(MIN_OVERLAP, len(prompt))
        # Only where the query's first characters occur can a suffix start (a scan of every cut copies the prompt
        # once per character: minutes of a blocked server for a megabyte prompt whose query does not match).
        head = query[:need]
        cut = prompt.find(head, 1) if len(head) == need else -1
        while 0 < cut <= len(prompt) - need and not query.startswith(prompt[cut:]):
            cut = prompt.find(head, cut + 1)
        if 0 < cut <= len(prompt) - need:
            response, truncated = query[len(prompt) - cut :], True
        else:
            raise InputError(
                f"the query does not start with its prompt nor with any suffix of it of {need}+ characters "
                f"(query {query[:60]!r}..., prompt ...{prompt[-60:]!r}); the query must be the decoded prompt + "
                "response: send the prompt exactly as the policy saw it (same chat template, no re-tokenising "
                "changes), e.g. OpenRLHF --data.apply_chat_template on both sides",
                field="query",
            )
    end, changed = len(response), True  # an end index, not a copy per stripped string (a response of 80,000 of them)
    while changed:
        changed = False
        for s in strip:
            if s and response.endswith(s, 0, end):
                end, changed = end - len(s), True
    return response[:end].strip(), truncated


def reference_text(value: Any, where: str) -> str | None:
    """A reference answer as the judge reads it (None: none): a string or finite number, or a list of them (one
    per line); anything else raises ``InputError`` naming ``where``."""
    if value is None or value == "":
        return None
    listed = isinstance(value, (list, tuple))
    for v in value if listed else [value]:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            what = (
                "a list label must hold strings or numbers" if listed else "expected a string, number or list of them"
            )
            raise InputError(f"{where}: {what}, got {type(v).__name__}", field="labels")
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(
                f"{where}: {v!r} is not a finite number; a reference answer must be text or a finite number: fix or "
                "drop it in the dataset",
                field="labels",
            )
    return ("\n".join(map(str, value)) or None) if listed else str(value)


def label_fields(label: Any, config: RewardConfig = _DEFAULT) -> dict[str, Any]:
    """The ``RewardSample`` fields a label sets: a reference answer, or a dict whose keys ``config``'s column
    settings name (``LABEL_COLUMNS``)."""
    if not isinstance(label, dict):
        answer = reference_text(label, "label")
        return {} if answer is None else {"reference_answer": answer}
    keys = {}
    for name, option in LABEL_COLUMNS.items():
        key = find_column(label, option, getattr(config, option), "label", required=False, flag=where(option))
        if key is not None:
            keys[name] = key
    if not keys:
        names = [getattr(config, o) for o in LABEL_COLUMNS.values()]
        raise InputError(
            f"label: a dict label needs at least one of the keys {', '.join(names)}; got the keys "
            f"{sorted(map(str, label))}; rename them in the dataset or send a plain string label",
            field="labels",
        )
    ignored = frozenset(map(str, label)) - set(keys.values())
    if ignored and ignored not in _ignored_logged:
        _ignored_logged.add(ignored)
        logger.info("label keys %s are ignored (used: %s)", sorted(ignored), ", ".join(keys.values()))
    # a checklist is validated with the sample (a bad one fails it alone, with the fix); "" is no other field
    out = {
        n: label[k] for n, k in keys.items() if n == "checklist" and label[k] is not None or label[k] not in (None, "")
    }
    if "reference_answer" in out:
        answer = reference_text(out.pop("reference_answer"), "label['reference_answer']")
        out.update({} if answer is None else {"reference_answer": answer})
    if not isinstance(out.get("instruction", ""), str):
        kind = type(out["instruction"]).__name__
        raise InputError(f"label['instruction']: expected a string, got {kind}", field="labels")
    return out


def make_samples(
    queries: Any,
    prompts: Any,
    labels: Any,
    strip: Sequence[str] = (),
    config: RewardConfig = _DEFAULT,
    names: Sequence[str] = ("queries", "prompts", "labels"),
    texts: bool = False,
) -> tuple[list[RewardSample | None], list[str | None], int]:
    """``(samples, reasons, truncated)``: a sample per query, or None with the reason it cannot be judged.
    Raises ``InputError`` (naming the argument as ``names`` say) when an argument is not a list (labels: or None)
    or their lengths differ, and with ``texts`` when a query or prompt is not a string: the caller's bug."""
    for name, values in zip(names, (queries, prompts, labels), strict=True):
        if values is None and name == names[2]:
            continue
        if not isinstance(values, (list, tuple)):
            raise InputError(
                f"{name}: expected a list (one item per sample), got {type(values).__name__}; fix: send the queries, "
                "prompts and labels as lists, as OpenRLHF does",
                field=name,
            )
        if len(values) != len(queries):
            raise InputError(
                f"{name}: expected {len(queries)} items (one per query), got {len(values)}; fix: send one per query",
                field=name,
            )
        strings = texts and name != names[2]
        wrong = next((i for i, v in enumerate(values) if not isinstance(v, str)), None) if strings else None
        if wrong is not None:
            raise InputError(
                f"{name}[{wrong}]: expected a string (the decoded text), got {type(values[wrong]).__name__}; fix: "
                "send the text as the policy saw it",
                field=name,
            )
    jobs: list[RewardSample | None] = []
    reasons: list[str | None] = []
    truncated = 0
    for i, (q, p) in enumerate(zip(queries, prompts, strict=True)):
        try:
            response, cut = split_query(q, p, strip)
            fields = label_fields(labels[i] if labels is not None else None, config)
        except InputError as e:
            logger.warning("sample %d not judged: %s", i, e)
            jobs.append(None)
            reasons.append(f"sample {i}: {e}")
            continue
        truncated += cut
        jobs.append(RewardSample(prompt=p, response=response, **fields))
        reasons.append(None)
    return jobs, reasons, truncated


def reward_dict(
    samples: Sequence[RewardSample | None],
    reasons: Sequence[str | None],
    judged: Sequence[SampleOutcome],
    batched: BatchedReward,
    policy: FailurePolicy,
) -> dict[str, Any]:
    """OpenRLHF's reward reply (``rewards``, ``scores``, ``extra_logs``, ``judge_failures``, ``failure_reasons``)
    for ``make_samples``' output and the live samples' outcomes ``judged``; a failed sample gets ``policy``'s number."""
    it = iter(judged)
    results = [next(it) if x is not None else batched.unjudged(r or "") for x, r in zip(samples, reasons, strict=True)]
    failed = sum(r.failed for r in results)
    stand_in = policy.value_for(batched.reward.config) if failed else 0.0
    rewards = [stand_in if r.reward is None else float(r.reward) for r in results]
    if failed:
        first = next(r.reason for r in results if r.failed)
        logger.warning(
            "%d of %d sample(s) failed and got the failure reward %s (first reason: %s)",
            failed,
            len(results),
            stand_in,
            first,
        )
    logs = [r.extra_logs() for r in results]
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": {k: [float(d[k]) for d in logs] for k in batched.extra_log_keys},
        "judge_failures": failed,
        "failure_reasons": [r.reason if r.failed else None for r in results],
    }


def configure(reward: Any, **settings: Any) -> BatchedReward:
    """Install ``reward`` (a ``PrometheusReward``) as ``reward_func``'s judge, with ``RewardSettings`` fields
    ``settings`` (over the environment); returns its queue."""
    s = RewardSettings.around(reward.config, settings)
    _shared.reset()
    return _shared.get(None, lambda: SharedReward(s.batched(reward), s, owned=False)).batched


def reset() -> None:
    """Drop the process-wide judge, closing a reward built from the settings."""
    _shared.reset()


def batched_reward() -> BatchedReward:
    """The process-wide ``BatchedReward`` (built from the environment on first use)."""
    return _shared.get(None, _from_settings).batched


def _from_settings() -> SharedReward:
    try:
        settings = RewardSettings.load()
        reward = settings.build_reward()
        check_judge(reward.judge_server(), reward=reward, canary=False)
    except PromRewardError as e:  # OpenRLHF logs reward_func errors at INFO only: say it loudly
        logger.error("prom-reward reward_func is not configured: %s", e)
        raise
    logger.info(
        "prom-reward reward_func ready (mode %s, failure reward %s)",
        settings.reward.mode,
        settings.failure_reward.value,
    )
    return SharedReward(settings.batched(reward), settings, owned=True)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """OpenRLHF's ``reward_func``: ``{"rewards", "scores", "extra_logs", "judge_failures", "failure_reasons"}``."""
    state = _shared.get(None, _from_settings)
    s = state.settings
    try:
        samples, reasons, _ = make_samples(queries, prompts, labels, s.strip, s.reward)
    except PromRewardError as e:  # not lists, or lengths that differ: the caller's bug (OpenRLHF logs it at INFO)
        logger.error("prom-reward reward_func got unusable arguments: %s", e)
        raise
    live = [x for x in samples if x is not None]
    try:
        judged = state.batched.score(live, timeout=s.request_timeout) if live else []
    except DeadlineExceeded as e:
        logger.warning("%d sample(s) failed on the deadline: %s", len(live), e)
        judged = [state.batched.unjudged(str(e)) for _ in live]
    except PromRewardError as e:  # outage_on_exhausted=raise (or a configuration error): OpenRLHF logs it at INFO only
        logger.error("prom-reward reward_func stops the run: %s", e)
        raise
    return reward_dict(samples, reasons, judged, state.batched, s.failure_reward)


def reward_func_path() -> str:
    """The file to give OpenRLHF as ``--reward.remote_url``."""
    return str(Path(__file__).with_name("openrlhf_reward_func.py"))
