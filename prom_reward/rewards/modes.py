"""The three reward modes (absolute, against a reference, round robin in a group), and checklist rows' rewards
(``checklist_rewards``): each judges a batch of resolved ``RewardSample`` items in one awaited call and returns
one reward (or None) per item (``ModeOutput``)."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from prom_reward.backends.sampling import SamplingOverrides
from prom_reward.checklist.judging import ajudge_checklists
from prom_reward.core.judge import EXPECTED_LOGPROBS, asks_expected
from prom_reward.core.results import JudgeFailure, Judgment, Verdict
from prom_reward.format.rubrics import get_rubric
from prom_reward.rewards.config import RewardConfig, grade_range, normalize_value
from prom_reward.rewards.samples import RewardSample


@dataclass
class ModeOutput:
    """What a mode (or a whole ``PrometheusReward.judge_batch``) returns: per item, each list (empty when unused)."""

    rewards: list[float | None]
    feedback: list[str | None]
    metrics: dict[str, float] = field(default_factory=dict)
    judges: list[str | None] = field(default_factory=list)  # which judge of a cascade decided (or ``mixed``)
    reasons: list[str | None] = field(default_factory=list)  # why it has no reward (None where judged)
    neutralized: list[int] = field(default_factory=list)  # template markers neutralised in its texts
    errors: list[JudgeFailure | None] = field(default_factory=list)  # the judge's failure behind a missing reward
    results: list[Judgment | None] = field(default_factory=list)  # the judgment its reward was read from

    def __post_init__(self) -> None:
        for name in ("judges", "reasons", "errors", "results"):  # a per-item field no item uses is held as []
            if all(v is None for v in getattr(self, name)):
                setattr(self, name, [])

    def item_errors(self) -> list[JudgeFailure | None]:
        """``errors``, one entry per item (what the outage loop reads)."""
        return self.errors or [None] * len(self.rewards)


def merge_metrics(parts: Sequence[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """One batch's metrics from those of its judge calls (``(items, metrics)`` each): rates and means averaged,
    weighted by items (NaN left out); counts, tokens and seconds summed.

    >>> merge_metrics([(3, {"tie_rate": 0.0, "judged_pairs": 3.0}), (1, {"tie_rate": 1.0, "judged_pairs": 1.0})])
    {'tie_rate': 0.25, 'judged_pairs': 4.0}
    """
    out: dict[str, float] = {}
    keys = list(dict.fromkeys(k for _, m in parts for k in m))
    for key in keys:
        values = [(n, m[key]) for n, m in parts if key in m]
        if key.endswith(("_rate", "_fraction", "agreement")) or key.startswith("mean_"):
            known = [(n, v) for n, v in values if v == v and n > 0]
            weight = sum(n for n, _ in known)
            out[key] = sum(n * v for n, v in known) / weight if weight else math.nan
        else:
            out[key] = float(sum(v for _, v in values))
    return out


def assemble(n: int, parts: Sequence[tuple[Sequence[int], ModeOutput]]) -> ModeOutput:
    """One output for ``n`` items from parts at their indices (a later part, a retry, replaces an earlier one)."""
    fields: dict[str, Any] = {name: [None] * n for name in ("rewards", "feedback", "judges", "errors", "results")}
    for idx, part in parts:
        for name, values in fields.items():
            for pos, i in enumerate(idx):
                values[i] = getattr(part, name)[pos] if getattr(part, name) else None
    return ModeOutput(**fields, metrics=merge_metrics([(len(idx), part.metrics) for idx, part in parts]))


def _call_metrics(results: Sequence[Any]) -> dict[str, float]:
    """The metrics every mode reports, read from this call's results (concurrent calls on one judge do not mix)."""
    return {
        "parse_failure_rate": sum(r.failures for r in results) / max(sum(len(r.samples) for r in results), 1),
        "judge_prompt_tokens": float(sum(r.prompt_tokens for r in results)),
        "judge_completion_tokens": float(sum(r.completion_tokens for r in results)),
        "truncated_responses": float(sum(bool(r.truncated) for r in results)),
    }


def _verdict_metrics(verdicts: Sequence[Verdict]) -> dict[str, float]:
    agree = [v.swap_agreement for v in verdicts if v.swap_agreement is not None]
    return {
        "tie_rate": sum(v.tie for v in verdicts) / max(len(verdicts), 1),
        "swap_agreement": fmean(agree) if agree else math.nan,
        **_call_metrics(verdicts),
    }


def _unique(items: Sequence[Any], key: Callable[[Any], Hashable]) -> tuple[list[Any], list[int]]:
    """Distinct items (first occurrence order) and, per item, the index of its distinct twin."""
    firsts: dict[Hashable, tuple[int, Any]] = {}  # per key: its index among the distinct items, its first item
    where = [firsts.setdefault(key(it), (len(firsts), it))[0] for it in items]
    return [it for _, it in firsts.values()], where


def _rubric_key(rubric: Any) -> Hashable:
    return rubric if isinstance(rubric, Hashable) else get_rubric(rubric)


@dataclass(frozen=True)
class ModeCall:
    """One judge call of a reward mode: its judge and config, the call's deadline and sampling (over the judge's)."""

    judge: Any
    cfg: RewardConfig
    deadline: float | None = None
    sampling: SamplingOverrides = None

    def options(self) -> dict[str, Any]:
        """The options of the judge call (a checklist's takes no sampling)."""
        return {"truncate_response": self.cfg.over_context == "truncate", "deadline": self.deadline}

    async def compare(self, pairs: Sequence[tuple[RewardSample, str]]) -> list[Verdict]:
        """The verdicts of (sample, other response) pairs, the sample's response as A, both orders."""
        if not pairs:
            return []
        firsts = [it for it, _ in pairs]
        texts = [it.instruction for it in firsts], [it.response for it in firsts], [other for _, other in pairs]
        rubrics, refs = [it.rubric for it in firsts], [it.reference_answer for it in firsts]
        return await self.judge.acompare(*texts, rubrics, refs, swap=True, sampling=self.sampling, **self.options())


def _per_item(results: Sequence[Any], rewards: list[float | None], metrics: dict[str, float]) -> ModeOutput:
    """A mode's output from each item's result (its distinct twin's) and reward."""
    errors = [r.error if not r.ok else None for r in results]
    who = [r.decided_by for r in results]
    feedback = [r.feedback for r in results]
    return ModeOutput(rewards, feedback, metrics, who, errors=errors, results=list(results))


async def absolute_rewards(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    judge, cfg, sampling = call.judge, call.cfg, call.sampling
    uniq, where = _unique(items, lambda it: (it.instruction, it.response, _rubric_key(it.rubric), it.reference_answer))
    k = cfg.num_samples if cfg.score == "mean" else 1
    if cfg.score == "expected" and not asks_expected(judge, sampling):
        asked = {"logprobs": EXPECTED_LOGPROBS}
        sampling = judge.sampling.merged(sampling).merged(asked) if sampling else asked
    columns = ([getattr(it, name) for it in uniq] for name in ("instruction", "response", "rubric", "reference_answer"))
    grades = await judge.agrade(*columns, num_samples=k, sampling=sampling, **call.options())
    raw = [g.value(cfg.score) for g in grades]
    span = grade_range(judge.format)  # the judge format's own scale: a binary or 3-point grade normalises on it
    rewards = [normalize_value(raw[w], "grade", cfg.normalize, span) for w in where]
    # score="expected" on a grade with a verdict but no expected score: the reason the grade gives (no logprobs ...)
    missing = [
        JudgeFailure("output", g.expected_reason) if r is None and g.ok and g.expected_reason else None
        for g, r in zip(grades, raw, strict=True)
    ]
    metrics = {
        **_call_metrics(grades),
        "forced_rate": sum(g.forced for g in grades) / max(sum(len(g.samples) for g in grades), 1),
        "unique_items": float(len(uniq)),
    }
    for name, score in (("mean_score", "mean"), ("mean_expected_score", "expected")):
        known = [v for g in grades if (v := g.value(score)) is not None]
        if known:
            metrics[name] = fmean(known)
    out = _per_item([grades[w] for w in where], rewards, metrics)
    if any(missing):
        metrics["no_expected_scores"] = float(sum(missing[w] is not None for w in where))
        out.errors = [missing[w] or e for w, e in zip(where, out.item_errors(), strict=True)]
    return out


async def reference_rewards(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    cfg = call.cfg
    uniq, where = _unique(
        items, lambda it: (it.instruction, it.response, it.baseline, _rubric_key(it.rubric), it.reference_answer)
    )
    verdicts = await call.compare([(it, it.baseline) for it in uniq])
    kind = cfg.pairwise_reward  # probability or sign
    sign = {"A": 1.0, "B": -1.0}
    raw = [v.p_a if kind == "probability" else sign.get(v.winner or "", 0.0 if v.tie else None) for v in verdicts]
    rewards = [normalize_value(raw[w], kind, cfg.normalize) for w in where]
    metrics = {
        **_verdict_metrics(verdicts),
        "win_rate": sum(v.winner == "A" for v in verdicts) / max(len(verdicts), 1),
    }
    return _per_item([verdicts[w] for w in where], rewards, metrics)


def bradley_terry(wins: list[list[float]], iterations: int = 100, prior: float = 0.5) -> list[float]:
    """Centred log-strengths from a wins matrix (``wins[i][j]``: times i beat j, ties as 0.5 each); each player
    also draws ``prior`` games against a virtual opponent of strength 1, so undefeated players stay finite."""
    n = len(wins)
    p = [1.0] * n
    for _ in range(iterations):
        new = []
        for i in range(n):
            w = sum(wins[i]) + prior
            denom = sum((wins[i][j] + wins[j][i]) / (p[i] + p[j]) for j in range(n) if j != i)
            denom += 2 * prior / (p[i] + 1.0)
            new.append(w / denom)
        p = new
    logs = [math.log(x) for x in p]
    mean = fmean(logs)
    return [x - mean for x in logs]


_ALONE = JudgeFailure(
    "input",
    "no other completion of its prompt to compare it with (pairwise_group judges a prompt's completions against "
    "each other; the others failed or none came)",
)


async def group_rewards(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    cfg = call.cfg
    groups: dict[Hashable, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.group, []).append(i)
    members = {g: _unique([items[i] for i in idx], lambda it: it.response) for g, idx in groups.items()}
    pairs = [(g, a, b) for g, (uniq, _) in members.items() for a in range(len(uniq)) for b in range(a + 1, len(uniq))]
    verdicts = await call.compare([(members[g][0][a], members[g][0][b].response) for g, a, b in pairs])
    outcome: dict[Hashable, dict[tuple[int, int], float]] = {g: {} for g in groups}
    judged: dict[tuple[Hashable, int], list[Verdict]] = {}  # per (group, distinct member): its pairs' verdicts
    for (g, a, b), v in zip(pairs, verdicts, strict=True):
        if v.winner is not None or v.tie:
            outcome[g][(a, b)] = 1.0 if v.winner == "A" else 0.0 if v.winner == "B" else 0.5
        for k in (a, b):
            judged.setdefault((g, k), []).append(v)
    rewards: list[float | None] = [None] * len(items)
    feedback: list[str | None] = [None] * len(items)
    judges: list[str | None] = [None] * len(items)
    errors: list[JudgeFailure | None] = [None] * len(items)
    degenerate = 0
    for g, idx in groups.items():
        uniq, where = members[g]
        alone = len(idx) == 1  # nothing to compare it with (its prompt's other completions failed, or none came)
        scores = [None] if alone else _group_scores(len(uniq), outcome[g], cfg)
        degenerate += len(uniq) == 1 and not alone
        for pos, i in enumerate(idx):
            vs = judged.get((g, where[pos]), [])
            who = {v.decided_by for v in vs if v.decided_by}
            rewards[i] = scores[where[pos]]
            feedback[i] = next((v.feedback for v in vs if v.feedback), None)  # the first of its pairs'
            judges[i] = None if not who else who.pop() if len(who) == 1 else "mixed"
            failure = next((v.error for v in vs if v.error is not None), _ALONE if alone else None)
            errors[i] = failure if rewards[i] is None else None
    metrics = {
        **_verdict_metrics(verdicts),
        "judged_pairs": float(len(verdicts)),
        "degenerate_groups": float(degenerate),
    }
    return ModeOutput(rewards, feedback, metrics, judges, errors=errors)


def _group_scores(n: int, outcome: dict[tuple[int, int], float], cfg: RewardConfig) -> list[float | None]:
    if n == 1:  # every completion identical: exactly as good as each other (a draw, normalised like any win rate)
        return [normalize_value(0.5, "probability", cfg.normalize) if cfg.group_reward == "win_rate" else 0.0]
    played: list[list[float]] = [[] for _ in range(n)]
    wins = [[0.0] * n for _ in range(n)]
    for (a, b), s in outcome.items():
        played[a].append(s)
        played[b].append(1.0 - s)
        wins[a][b] += s
        wins[b][a] += 1.0 - s
    if cfg.group_reward == "win_rate":
        return [normalize_value(fmean(p), "probability", cfg.normalize) if p else None for p in played]
    strengths = bradley_terry(wins)
    return [strengths[i] if played[i] else None for i in range(n)]


MODE_FUNCTIONS = {
    "absolute": absolute_rewards,
    "pairwise_reference": reference_rewards,
    "pairwise_group": group_rewards,
}

CHECKLIST_MODES = ("absolute",)  # the reward modes that judge a checklist (per criterion, each response alone)


async def checklist_rewards(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    """One reward per resolved sample with a checklist (None with the failure behind it)."""
    cfg = call.cfg
    texts = [it.instruction or "" for it in items], [it.response for it in items]  # resolved: always text
    checklists, refs = [it.checklist for it in items], [it.reference_answer for it in items]
    batch = await ajudge_checklists(call.judge, *texts, checklists, cfg.checklist(), refs, **call.options())
    lo, hi = grade_range(call.judge.format)
    rewards: list[float | None] = []
    errors: list[JudgeFailure | None] = []
    for o in batch.outcomes:
        value = o.aggregate.value
        grade = None if value is None else lo + value * (hi - lo)
        rewards.append(normalize_value(grade, "grade", cfg.normalize, (lo, hi)))
        why = o.aggregate.reason or "the checklist could not be judged"
        errors.append(None if value is not None else JudgeFailure(o.error.kind if o.error else "output", why))
    known = [o.aggregate.value for o in batch.outcomes if o.aggregate.value is not None]
    metrics = {
        **batch.metrics,
        "unique_items": batch.metrics.get("checklist_judgments", 0.0),
    }
    if known:
        metrics["mean_checklist_score"] = fmean(known)
    return ModeOutput(rewards, [o.feedback for o in batch.outcomes], metrics, errors=errors)


async def run_mode(call: ModeCall, items: Sequence[RewardSample]) -> ModeOutput:
    """The config's mode for the samples without a checklist, ``checklist_rewards`` for those with one, merged in
    order."""
    listed = [i for i, it in enumerate(items) if it.checklist is not None]
    plain = [i for i, it in enumerate(items) if it.checklist is None]
    parts = [(listed, await checklist_rewards(call, [items[i] for i in listed]))] if listed else []
    if plain or not listed:
        parts.append((plain, await MODE_FUNCTIONS[call.cfg.mode](call, [items[i] for i in plain])))
    return parts[0][1] if len(parts) == 1 else assemble(len(items), parts)


def batch_runner(
    judge: Any, cfg: RewardConfig, samples: Sequence[Any], sampling: SamplingOverrides = None
) -> Callable[[Sequence[int], float | None], Awaitable[ModeOutput]]:
    """The judge call the outage loop makes for the samples at the given indices (``run_mode``), with its time
    (``judge_seconds``) and the change of a composite judge's counters (a cascade's routing) as metrics."""

    async def run(idx: Sequence[int], deadline: float | None) -> ModeOutput:
        before = dict(judge.stats.counters)
        start = time.perf_counter()
        out = await run_mode(ModeCall(judge, cfg, deadline, sampling), [samples[i] for i in idx])
        out.metrics = {**out.metrics, "judge_seconds": time.perf_counter() - start}
        out.metrics.update({k: float(v - before.get(k, 0)) for k, v in judge.stats.counters.items()})
        return out

    return run
