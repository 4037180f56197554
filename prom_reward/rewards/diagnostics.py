"""Drift diagnostics (``DIAG_KEYS``, described in docs/rewards.md): is this batch's reward turning into a length
or format reward? Computed from the batch alone; every key is a number in every batch (an undefined correlation
reads 0). And the length control the config asks for (``control_length``: correction, overlong penalty)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import fmean, median

from prom_reward.format.sanitize import neutralize
from prom_reward.rewards.config import RewardConfig, reward_scale
from prom_reward.stats import slope, spearman

DIAG_KEYS = (  # in the order they are logged
    "diag/length_spearman",
    "diag/length_spearman_group_mean",
    "diag/length_spearman_groups",
    "diag/top_score_share",
    "diag/top_group_share",
    "diag/injection_neutralized",
    "diag/feedback_chars_mean",
    "diag/response_chars_mean",
)


def diagnostic_keys(cfg: RewardConfig) -> tuple[str, ...]:
    """Every batch's diagnostic metric names under ``cfg``: ``DIAG_KEYS`` plus the length control's (when on)."""
    return DIAG_KEYS + length_keys(cfg)


def top_of_scale(cfg: RewardConfig) -> float | None:
    """The lowest reward that counts as a top score under ``cfg`` (None: Bradley-Terry has no top)."""
    scale = reward_scale(cfg)
    return None if scale is None else scale[1] - (scale[1] - scale[0]) / 8


def diagnostics(
    rewards: Sequence[float | None],
    responses: Sequence[str],
    groups: Sequence[Hashable],
    feedback: Sequence[str | None],
    *,
    top: float | None,
    markers: Sequence[str] | None = None,
) -> dict[str, float]:
    """The ``DIAG_KEYS`` metrics of one batch (one entry per sample in each sequence)."""
    n = len(rewards)
    if not len(responses) == len(groups) == len(feedback) == n:
        raise ValueError(
            f"diagnostics: {n} rewards, {len(responses)} responses, {len(groups)} groups and "
            f"{len(feedback)} feedbacks; pass one of each per sample"
        )
    lengths = [len(r) for r in responses]
    scored = [i for i in range(n) if rewards[i] is not None]
    values: list[float] = [rewards[i] for i in scored]  # type: ignore[misc]
    members: dict[Hashable, list[int]] = {}
    for i in scored:
        members.setdefault(groups[i], []).append(i)
    within = [
        spearman([rewards[i] for i in idx], [lengths[i] for i in idx])  # type: ignore[misc]
        for idx in members.values()
    ]
    defined = [c for c in within if c is not None]
    on_top = [top is not None and v >= top - 1e-9 for v in values]
    top_groups = [
        top is not None and all(rewards[i] >= top - 1e-9 for i in idx)  # type: ignore[operator]
        for idx in members.values()
    ]
    notes = [len(f) for f in feedback if f]
    return {
        "diag/length_spearman": spearman(values, [lengths[i] for i in scored]) or 0.0,
        "diag/length_spearman_group_mean": fmean(defined) if defined else 0.0,
        "diag/length_spearman_groups": float(len(defined)),
        "diag/top_score_share": sum(on_top) / len(on_top) if on_top else 0.0,
        "diag/top_group_share": sum(top_groups) / len(top_groups) if top_groups else 0.0,
        "diag/injection_neutralized": sum(neutralize(r, (), markers)[1] > 0 for r in responses) / n if n else 0.0,
        "diag/feedback_chars_mean": fmean(notes) if notes else 0.0,
        "diag/response_chars_mean": fmean(lengths) if lengths else 0.0,
    }


CORRECTION_KEYS = ("length/corrected_groups", "length/reward_per_doubling")
PENALTY_KEYS = ("length/penalized_share", "length/penalty_mean")


def length_keys(cfg: RewardConfig) -> tuple[str, ...]:
    """The metric names ``control_length`` reports under ``cfg`` (none when length control is off)."""
    correction = CORRECTION_KEYS if cfg.length_correction else ()
    penalty = PENALTY_KEYS if cfg.overlong_penalty else ()
    return ("length/spearman_before", *correction, *penalty) if correction or penalty else ()


def overlong_penalty(length: int, baseline: float, cfg: RewardConfig) -> float:
    """The penalty (>= 0) for a completion of ``length`` characters against ``baseline``."""
    start = cfg.overlong_ratio * baseline
    if baseline <= 0 or length <= start:
        return 0.0
    return cfg.overlong_penalty * min(1.0, (length - start) / start)


def control_length(
    rewards: Sequence[float | None], responses: Sequence[str], groups: Sequence[Hashable], cfg: RewardConfig
) -> tuple[list[float | None], dict[str, float]]:
    """(rewards after the length control ``cfg`` asks for, its metrics); unchanged when it asks for none."""
    out = list(rewards)
    keys = length_keys(cfg)
    if not keys:
        return out, {}
    lengths = [len(r) for r in responses]
    scored = [i for i, r in enumerate(out) if r is not None]
    before = spearman([out[i] for i in scored], [lengths[i] for i in scored])  # type: ignore[misc]
    metrics: dict[str, float] = {"length/spearman_before": before or 0.0}
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    if cfg.length_correction:
        logs, slopes = [math.log(max(n, 1)) for n in lengths], []
        for idx in members.values():  # each group's log-length fit subtracted
            group = [i for i in idx if out[i] is not None]
            x = [logs[i] for i in group]
            b = slope(x, [out[i] for i in group]) if len(group) >= cfg.length_min_group else None  # type: ignore[misc]
            if b is not None:
                mx = fmean(x)
                for i in group:
                    out[i] = out[i] - b * (logs[i] - mx)  # type: ignore[operator]
                slopes.append(b)
        metrics["length/corrected_groups"] = float(len(slopes))
        metrics["length/reward_per_doubling"] = fmean(slopes) * math.log(2) if slopes else 0.0
    if cfg.overlong_penalty:
        penalties = [0.0] * len(out)
        fixed = None if isinstance(cfg.overlong_baseline, str) else float(cfg.overlong_baseline)  # else: a median
        for idx in members.values():
            base = median(lengths[i] for i in idx) if fixed is None else fixed
            for i in idx:
                penalties[i] = overlong_penalty(lengths[i], base, cfg)
        for i in scored:
            out[i] = out[i] - penalties[i]  # type: ignore[operator]
        hit = [penalties[i] for i in scored if penalties[i] > 0]
        metrics["length/penalized_share"] = len(hit) / len(scored) if scored else 0.0
        metrics["length/penalty_mean"] = fmean(penalties[i] for i in scored) if scored else 0.0
    return out, metrics
