"""Opt-in length control (off by default): a group-relative correction of ``reward ~ log(length)``
(``length_correction``) and a soft overlong penalty (``overlong_penalty``); formulas in docs/rewards.md."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import fmean, median

from prom_reward.rewards.config import RewardConfig
from prom_reward.stats import slope, spearman

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
        for idx in members.values():
            base = (
                float(cfg.overlong_baseline)
                if not isinstance(cfg.overlong_baseline, str)
                else median(lengths[i] for i in idx)
            )
            for i in idx:
                penalties[i] = overlong_penalty(lengths[i], base, cfg)
        for i in scored:
            out[i] = out[i] - penalties[i]  # type: ignore[operator]
        hit = [penalties[i] for i in scored if penalties[i] > 0]
        metrics["length/penalized_share"] = len(hit) / len(scored) if scored else 0.0
        metrics["length/penalty_mean"] = fmean(penalties[i] for i in scored) if scored else 0.0
    return out, metrics
