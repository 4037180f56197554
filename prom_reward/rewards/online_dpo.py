"""``OnlineDPOJudgeReward``: a pairwise Prometheus judge as the reward of TRL's online DPO: 1.0 for each pair's
winner, 0.0 for its loser, never an equal reward (docs/rewards.md, "Online DPO": the layout, tie rounds, the coin)."""

from __future__ import annotations

import dataclasses
import random
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from prom_reward.checklist.criteria import check_grading_format
from prom_reward.core.results import JudgeFailure, Verdict
from prom_reward.core.sampler import check_counts
from prom_reward.errors import ConfigError, InputError
from prom_reward.rewards.config import RewardConfig, reward_config
from prom_reward.rewards.diagnostics import diagnostics
from prom_reward.rewards.modes import ModeOutput
from prom_reward.rewards.reward import PrometheusReward, log_to_trl
from prom_reward.rewards.samples import RewardSample, column_values, response_text

_NOT_JUDGED = "the pair could not be judged"
_TRL_KWARGS = ("trainer_state", "log_metric", "log_extra", "environments")


@dataclass
class PairwiseRewardStats:
    """Running counters over the reward's lifetime (a pair is (a_i, b_i) of one prompt)."""

    calls: int = 0  # reward calls (one per trainer batch)
    pairs: int = 0
    decided_by_judge: int = 0
    """Pairs the judge decided (both orders agreeing), in the first round or a tie round."""
    decided_after_ties: int = 0
    """Of those, pairs decided only in a tie round."""
    tie_rounds: int = 0
    """Re-judgements of undecided pairs (a pair judged in three tie rounds counts 3)."""
    ties: int = 0
    """Verdicts without a winner because the judge could not separate the two (all rounds)."""
    judge_failures: int = 0
    """Verdicts without a winner because no order gave a verdict (all rounds)."""
    decided_by_p_a: int = 0
    """Pairs still undecided after the tie rounds, given to the side their mean p_a favours."""
    coin_flips: int = 0
    """Pairs still undecided with a mean p_a of exactly 0.5 (or none), settled by the seeded coin."""
    swap_checked: int = 0  # verdicts where both orders gave a winner (all rounds); swap_agreed: the same one
    swap_agreed: int = 0
    first_half_wins: int = 0
    """Pairs whose first-half completion got 1.0 (a position-bias check: about half is healthy)."""
    unjudged_pairs: int = 0
    """Pairs that could not be judged at all (bad input, or no answer past the outage budget), settled by the coin."""

    @property
    def swap_agreement_rate(self) -> float:
        """swap_agreed / swap_checked (NaN before any verdict with both orders)."""
        return self.swap_agreed / self.swap_checked if self.swap_checked else float("nan")

    def as_dict(self) -> dict[str, float]:
        """The counters and the agreement rate, for logging."""
        return {**dataclasses.asdict(self), "swap_agreement_rate": self.swap_agreement_rate}

    def settle(self, verdicts: Sequence[Verdict], coin: random.Random) -> tuple[bool, str]:
        """Count one pair's verdicts (its rounds, in order); (whether its first-half completion wins, what decided)."""
        self.tie_rounds += max(len(verdicts) - 1, 0)
        for v in verdicts:
            self.ties += v.winner is None and v.tie
            self.judge_failures += v.winner is None and not v.tie
            if v.swap_agreement is not None:
                self.swap_checked += 1
                self.swap_agreed += v.swap_agreement
        known = [v.p_a for v in verdicts if v.p_a is not None]
        p_a = fmean(known) if known else 0.5
        if verdicts and verdicts[-1].winner is not None:
            first, way = verdicts[-1].winner == "A", "judge"
            self.decided_by_judge += 1
            self.decided_after_ties += len(verdicts) > 1
        elif p_a != 0.5:
            first, way = p_a > 0.5, "p_a"
            self.decided_by_p_a += 1
        else:
            first, way = coin.random() < 0.5, "coin"
            self.coin_flips += 1
        self.first_half_wins += first
        return first, way


class OnlineDPOJudgeReward:
    """Pairwise judge reward for ``OnlineDPOTrainer(reward_funcs=...)`` (TRL 1.16 layout).

    Args:
        judge: a ``PrometheusJudge``, or a dict of its options (built on first call, in each process).
        config: a ``RewardConfig`` (or its fields as keywords; ``name`` defaults to ``prometheus_pairwise``); the
            grade-to-reward fields (``mode``, ``normalize``, length control) do not apply to its 1 / 0 rewards.
        max_tie_rounds: re-judging rounds for undecided pairs (two judge calls per pair each).
        seed: seed of the coin that settles pairs whose mean p_a is exactly 0.5.
    """

    def __init__(
        self,
        judge: Any,
        config: RewardConfig | None = None,
        *,
        max_tie_rounds: int = 3,
        seed: int = 0,
        **options: Any,
    ) -> None:
        self.config = reward_config(config, options, "OnlineDPOJudgeReward", name="prometheus_pairwise")
        check_counts(max_tie_rounds=(max_tie_rounds, 0))
        if self.config.rubric is None:
            raise ConfigError(
                "none given; fix: pass a built-in name, a Rubric, a dict or a file path (rows may override it)",
                "rubric",
            )
        pairwise = dataclasses.replace(
            self.config,
            mode="pairwise_reference",
            pairwise_reward="probability",
            normalize=None,
            length_correction=False,
            overlong_penalty=0.0,
            failure_reward=None,
        )
        self.reward = PrometheusReward(judge, pairwise)  # every pair's path: a_i against its baseline b_i
        self.reward.checklist_modes = ("pairwise_reference",)  # a checklist pair compares its two checklist rewards
        self.canary, self.health = self.reward.canary, self.reward.health
        self.max_tie_rounds = max_tie_rounds
        self.seed = seed
        self.__name__ = self.config.name
        self.stats = PairwiseRewardStats()
        self.last_metrics: dict[str, float] = {}
        self._rng = random.Random(seed)
        self._trainer: Callable[[], Any] | None = None

    @property
    def judge(self) -> Any:
        """The judge (built on first use when given as options)."""
        return self.reward.judge

    def close(self) -> None:
        """Close the judge if this reward built it."""
        self.reward.close()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_trainer": None}

    def attach(self, trainer: Any) -> OnlineDPOJudgeReward:
        """Add each batch's metrics to ``trainer.stats`` (held by a weak reference); returns self."""
        if not isinstance(getattr(trainer, "stats", None), dict):
            raise ConfigError(f"attach: expected an OnlineDPOTrainer (a .stats dict), got {type(trainer).__name__}")
        self._trainer = weakref.ref(trainer)
        return self

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        """1.0 for the winner of each pair (i, i+B), 0.0 for the loser."""
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        layout = (
            "this reward is for OnlineDPOTrainer's layout: prompts [p0..pB-1, p0..pB-1] and completions "
            "[a0..aB-1, b0..bB-1] (two completions per prompt)"
        )
        if len(prompts) != len(completions):
            raise InputError(
                f"got {len(prompts)} prompts but {len(completions)} completions; {layout}", field="completions"
            )
        if len(prompts) % 2:
            raise InputError(f"got an odd number of prompts ({len(prompts)}); {layout}", field="prompts")
        b = len(prompts) // 2
        for i in range(b):
            if prompts[i] != prompts[b + i]:
                raise InputError(
                    f"prompt {i} differs from prompt {b + i} (its pair); {layout}", index=b + i, field="prompts"
                )
        if b == 0:
            return []
        cfg = self.config
        named = (cfg.rubric_column, cfg.reference_column, cfg.checklist_column)  # one value per prompt or completion
        rubrics, refs, checklists = (column_values(name, columns.get(name), 2 * b, b)[:b] for name in named)
        if any(c is not None for c in checklists):  # graded: refused before anything is judged in a format that cannot
            check_grading_format(self.judge.format, cfg.checklist_column)

        def sample(i: int, first: bool, checklist: Any = None) -> RewardSample:
            a, other = (completions[i], completions[b + i]) if first else (completions[b + i], completions[i])
            if other is None:  # a missing completion is judged as the response, so its pair's reason names it
                a, other = other, a
            return RewardSample(prompts[i], a, refs[i], rubrics[i], baseline=other, checklist=checklist)

        history: list[list[Verdict]] = [[] for _ in range(b)]
        unjudged: dict[int, str] = {}
        resample = {"temperature": 1.0} if self.judge.sampling.temperature == 0 else None
        todo, rounds, seconds = list(range(b)), -1, 0.0
        once = {i for i in range(b) if checklists[i] is not None}  # judged in one round only: checklist pairs
        batch_metrics: dict[str, float] = {}
        while todo and rounds < self.max_tie_rounds:
            samples: list[RewardSample] = []
            for i in todo:  # a checklist pair: both completions, each rewarded by its checklist
                c = checklists[i]
                samples += [sample(i, True, c), sample(i, False, c)] if c is not None else [sample(i, True)]
            start = time.perf_counter()
            out = self.reward.judge_batch(samples, sampling=resample if rounds >= 0 else None)
            seconds += time.perf_counter() - start
            batch_metrics = batch_metrics or out.metrics
            k = 0
            for i in todo:
                found = _checklist_verdict(out, k) if checklists[i] is not None else _verdict(out, k)
                k += 1 + (checklists[i] is not None)
                if isinstance(found, str):  # not judged (not asked again): unjudged unless an earlier round judged it
                    unjudged.update({} if history[i] else {i: found})
                    once.add(i)
                else:
                    history[i].append(found)
            rounds += 1
            todo = [i for i in todo if i not in once and history[i][-1].winner is None]
        rounds = max(rounds, 0)

        s = PairwiseRewardStats(calls=1, pairs=b, unjudged_pairs=len(unjudged))  # this batch's, added to .stats
        firsts, how = zip(*(s.settle(verdicts, self._rng) for verdicts in history), strict=True)
        rewards = [float(first) for first in firsts] + [float(not first) for first in firsts]
        for f in dataclasses.fields(s):
            setattr(self.stats, f.name, getattr(self.stats, f.name) + getattr(s, f.name))
        metrics = {
            **batch_metrics,  # the reward path's metrics of the first round (tokens, parse failures, checklists ...)
            "pairs": float(b),
            "tie_rounds": float(rounds),
            "rejudged_pairs": float(s.tie_rounds),
            "decided_by_judge_rate": s.decided_by_judge / b,
            "decided_by_p_a": float(s.decided_by_p_a),
            "coin_flips": float(s.coin_flips),
            "judge_failures": float(s.judge_failures),
            "swap_agreement": s.swap_agreement_rate,
            "first_half_win_rate": s.first_half_wins / b,
            "judge_seconds": seconds,
            "unjudged_pairs": float(len(unjudged)),
        }
        feedback = [vs[-1].feedback if vs else None for vs in history]  # an unjudged pair has no verdict
        responses = [response_text(c) for c in completions]
        markers = self.judge.format.markers  # win/loss: no top, diag/top_* read 0
        metrics.update(diagnostics(rewards, responses, list(range(b)) * 2, feedback * 2, top=None, markers=markers))
        self.last_metrics = metrics
        if (trainer := self._trainer() if self._trainer is not None else None) is not None:
            for key, value in metrics.items():
                trainer.stats.setdefault(f"{self.__name__}/{key}", []).append(value)
        feedback = [f or unjudged.get(i) or "" for i, f in enumerate(feedback)]
        log_to_trl(self.__name__, kwargs, metrics, {"decided_by": [*how, *how], "feedback": feedback + feedback})
        return rewards


def _unjudged(out: ModeOutput, k: int, error: JudgeFailure | None) -> str | None:
    """Why sample ``k`` was not judged (its input, the transport, the outage budget), or None when it was read."""
    if error is not None and error.kind == "output":
        return None
    return (out.reasons[k] if out.reasons else None) or (error.reason if error is not None else _NOT_JUDGED)


def _verdict(out: ModeOutput, k: int) -> Verdict | str:
    """Pair sample ``k``'s verdict, or why it was not judged."""
    v = out.results[k] if out.results else None
    if not isinstance(v, Verdict):
        return _unjudged(out, k, out.item_errors()[k]) or _NOT_JUDGED
    return v if v.error is None else _unjudged(out, k, v.error) or v


def _checklist_verdict(out: ModeOutput, k: int) -> Verdict | str:
    """The verdict of checklist samples ``k`` (A) and ``k + 1`` (B) from their rewards, or why it was not judged."""
    ra, rb = out.rewards[k], out.rewards[k + 1]
    feedback = f"A: {out.feedback[k] or ''}\nB: {out.feedback[k + 1] or ''}"
    if ra is None or rb is None:
        side, j = ("A", k) if ra is None else ("B", k + 1)
        error = out.errors[j] if out.errors else None
        why = _unjudged(out, j, error)
        if why is not None:
            return why
        failure = JudgeFailure("output", f"response {side}: {error.reason if error else 'no checklist score'}")
        return Verdict(winner=None, feedback=feedback, error=failure, reason=failure.reason)
    if ra == rb:
        return Verdict(winner=None, tie=True, feedback=feedback, reason=f"tie: both checklist rewards are {ra:.3g}")
    return Verdict(winner="A" if ra > rb else "B", feedback=feedback)
