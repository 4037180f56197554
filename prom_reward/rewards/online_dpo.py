"""``OnlineDPOJudgeReward``: a pairwise Prometheus judge as the reward of TRL's online DPO.

TRL 1.16's ``trl.experimental.online_dpo.OnlineDPOTrainer`` samples two completions per prompt and
calls each reward function once per batch with ``prompts = [p0..pB-1, p0..pB-1]`` and
``completions = [a0..aB-1, b0..bB-1]``; pair i's chosen completion is ``a_i`` when
``reward[i] >= reward[i + B]``, so an equal reward silently favours the first half. This reward
judges every pair (a_i, b_i) in one batched pairwise call with both orders (``swap=True``) and gives
1.0 to the winner, 0.0 to the loser. A pair the judge cannot separate (orders disagree, samples
split, no verdict) is re-judged with fresh samples, up to ``max_tie_rounds`` times; one still
undecided goes to the side its mean ``p_a`` over all rounds favours, and an exact 0.5 to a seeded
coin flip: never to the first half by default.

Every pair is judged with its own outcome: a pair that cannot be judged (a lone surrogate, a prompt
over the judge's context with ``over_context="fail"``) is settled by the coin alone and counted
(``unjudged_pairs``); pairs the transport failed are asked again (``rewards.outage``), and a judge
that stays down past the ``outage`` budget stops the step with
``JudgeUnavailableError`` (TRL's online DPO cannot take a missing reward), or with
``OutagePolicy(on_exhausted="fail")`` the unanswered pairs go to the coin, counted. Instructions and
reference answers are neutralised like responses.

Each batch's metrics include the drift diagnostics of ``prom_reward.rewards.diagnostics`` (``diag/...``:
``diag/length_spearman_group_mean`` is +1 when the longer completion of every pair won).

OnlineDPO in TRL 1.16 passes no ``log_metric``/``log_extra`` (they are used when a trainer does):
counters accumulate on ``.stats``, the last batch's metrics on ``.last_metrics``, and after
``reward.attach(trainer)`` each batch's metrics join the trainer's own logs (``<name>/coin_flips`` ...).

Example:
    >>> from prom_reward import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["B is right. [RESULT] B", "A is right. [RESULT] A"])
    >>> reward = OnlineDPOJudgeReward(judge, rubric="factual_validity")
    >>> reward(prompts=["Name a prime.", "Name a prime."], completions=["9", "7"])
    [0.0, 1.0]
    >>> (reward.stats.pairs, reward.stats.decided_by_judge, reward.stats.coin_flips)
    (1, 1, 0)
"""

from __future__ import annotations

import dataclasses
import random
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.checklist.criteria import check_grading_format
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.format.resolve import RubricResolver
from prom_reward.format.sanitize import neutralize
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.diagnostics import diagnostics
from prom_reward.rewards.holder import JudgeHolder
from prom_reward.rewards.online_dpo_judging import Judged, Texts, ajudge_isolated
from prom_reward.rewards.outage import JudgeHealth
from prom_reward.rewards.startup import CANARY_INSTRUCTION, CANARY_RESPONSES, CanaryGate, canary_rubric

__all__ = ["OnlineDPOJudgeReward", "PairwiseRewardStats"]

_TRL_KWARGS = ("trainer_state", "log_metric", "log_extra", "environments")


@dataclass
class PairwiseRewardStats:
    """Running counters over the reward's lifetime (a pair is (a_i, b_i) of one prompt)."""

    calls: int = 0
    """Reward calls (one per trainer batch)."""
    pairs: int = 0
    """Pairs rewarded."""
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
    swap_checked: int = 0
    """Verdicts where both orders gave a winner (all rounds)."""
    swap_agreed: int = 0
    """Of those, verdicts where both orders picked the same response."""
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


class OnlineDPOJudgeReward(JudgeHolder):
    """Pairwise judge reward for ``OnlineDPOTrainer(reward_funcs=...)`` (TRL 1.16 layout).

    Args:
        judge: a ``PrometheusJudge``, or a dict of its options (built on first call; such a reward
            pickles, and each process builds its own judge).
        config: the reward's ``RewardConfig``, the one settings model of every reward path (or its
            fields as keywords; ``name`` defaults to ``prometheus_pairwise`` here). This reward reads
            ``rubric`` (pairwise needs only the criteria), ``reference_answer``, ``rubric_column``,
            ``reference_column``, ``checklist_column`` (a row with a checklist is decided by its completions'
            checklist scores, ``rewards.online_dpo_judging``, judged as ``checklist_mode``,
            ``checklist_aggregation``, ``score`` and ``num_samples`` say), ``name``, ``over_context`` (a pair
            over the judge's context: ``truncate`` shortens the responses, ``fail`` leaves it to the coin) and
            ``outage`` (how a failing judge is retried; default: stop past the budget); the grade-to-reward
            fields (``mode``, ``normalize``, length control) do not apply to its 1 / 0 rewards.
        max_tie_rounds: re-judging rounds for undecided pairs. 3, not the judge's 5
            (``compare_by_grades``): here every round runs inside the training step and costs two
            judge calls (both orders) per undecided pair, and a pair still undecided after three
            rounds is settled by its mean p_a, which rarely flips with more rounds.
        seed: seed of the coin that settles pairs whose p_a is exactly 0.5.
    """

    _transient = ("_trainer",)

    def __init__(
        self,
        judge: Any,
        config: RewardConfig | None = None,
        *,
        max_tie_rounds: int = 3,
        seed: int = 0,
        **options: Any,
    ) -> None:
        super().__init__(judge)
        if config is not None and (options or not isinstance(config, RewardConfig)):
            raise ConfigError(
                f"config: expected a RewardConfig and no reward fields beside it, got {type(config).__name__} "
                f"and {sorted(options)}; fix: OnlineDPOJudgeReward(judge, RewardConfig(...)) or its fields as keywords"
            )
        self.config = config or RewardConfig(**{"name": "prometheus_pairwise", **options})
        fmt = self.match_format(self.config.format, "relative")  # it asks for verdicts, whatever the config's mode
        rubric, name = self.config.rubric, self.config.name
        if not isinstance(max_tie_rounds, int) or isinstance(max_tie_rounds, bool) or max_tie_rounds < 0:
            raise ConfigError(f"max_tie_rounds must be an int >= 0, got {max_tie_rounds!r}")
        if rubric is None:
            raise ConfigError("rubric: pass a built-in name, a Rubric, a dict or a file path (rows may override it)")
        try:  # a bad default would fail every pair alone: the run would train on coin flips
            default = RubricResolver(rubric).default
        except InputError as e:
            raise ConfigError(f"rubric: {e}") from e
        self._canary_rubric = canary_rubric(fmt, "relative", default)  # what the canary is judged with
        self.max_tie_rounds = max_tie_rounds
        self.seed = seed
        self.health = JudgeHealth()
        self.__name__ = name
        self.stats = PairwiseRewardStats()
        self.last_metrics: dict[str, float] = {}
        self._rng = random.Random(seed)
        self.canary = CanaryGate(judge)  # the configuration canary, run before the first batch (rewards.startup)
        self._trainer: Callable[[], Any] | None = None

    def attach(self, trainer: Any) -> OnlineDPOJudgeReward:
        """Add each batch's metrics to ``trainer.stats``, which OnlineDPOTrainer averages into its
        logs (and resets) at every logging step. Holds only a weak reference; returns self."""
        if not isinstance(getattr(trainer, "stats", None), dict):
            raise ConfigError(f"attach: expected an OnlineDPOTrainer (a .stats dict), got {type(trainer).__name__}")
        self._trainer = weakref.ref(trainer)
        return self

    # -- the reward ---------------------------------------------------------------------
    def _half(self, prompts: Sequence[Any], completions: Sequence[Any]) -> int:
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
        return b

    def _column(self, columns: dict[str, Any], name: str, b: int, default: Any) -> list[Any]:
        values = columns.get(name)
        if values is None:
            return [default] * b
        if not isinstance(values, (list, tuple)) or len(values) not in (b, 2 * b):
            got = len(values) if hasattr(values, "__len__") else "?"
            raise InputError(
                f"column {name!r}: expected one value per completion ({2 * b}), got "
                f"{type(values).__name__} of length {got}",
                field=name,
            )
        return [default if v is None else v for v in list(values)[:b]]

    def _neutralized(self, texts: Texts, refs: list[Any]) -> tuple[Texts, list[Any]]:
        """Instructions and reference answers with template markers neutralised (the judge does the responses)."""
        judge = self.judge
        if not judge.neutralize_markers:
            return texts, refs
        special, markers = judge.special_tokens, judge.format.markers
        ins = [neutralize(t, special, markers)[0] for t in texts[0]]
        refs = [neutralize(r, special, markers)[0] if isinstance(r, str) else r for r in refs]
        return (ins, texts[1], texts[2]), refs

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float]:
        """1.0 for the winner of each pair (i, i+B), 0.0 for the loser."""
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        log_extra: Callable[[str, list], None] | None = kwargs.get("log_extra")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS}
        b = self._half(prompts, completions)
        if b == 0:
            return []
        texts, unreadable = _pair_texts(prompts, completions, b)
        cfg = self.config
        rubrics = self._column(columns, cfg.rubric_column, b, cfg.rubric)
        refs = self._column(columns, cfg.reference_column, b, cfg.reference_answer)
        texts, refs = self._neutralized(texts, refs)

        def judged(
            texts: Texts, rubrics: list[Any], refs: list[Any], checklists: list[Any], failed: dict[int, str]
        ) -> Judged:
            judge, rounds, health = self.judge, self.max_tie_rounds, self.health
            return run_sync(
                lambda: ajudge_isolated(judge, texts, rubrics, refs, checklists, cfg, rounds, health, failed)
            )

        checklists = self._column(columns, cfg.checklist_column, b, None)
        if any(c is not None for c in checklists):  # graded: refused before anything is judged in a format that cannot
            check_grading_format(self.judge.format, cfg.checklist_column)
        if self.canary.due:
            canary = ([CANARY_INSTRUCTION], [CANARY_RESPONSES[0]], [CANARY_RESPONSES[1]])

            async def canary_once() -> str | None:
                judge, rounds, rubric = self.judge, self.max_tie_rounds, self._canary_rubric
                out = await ajudge_isolated(judge, canary, [rubric], [None], [None], cfg, rounds, self.health, {})
                return next(iter(out[2].values()), None)

            run_sync(lambda: self.canary.run(canary_once))
        start = time.perf_counter()
        history, rounds, unjudged, checklist_metrics = judged(texts, rubrics, refs, checklists, unreadable)
        seconds = time.perf_counter() - start

        s = self.stats
        before = dataclasses.replace(s)
        s.calls += 1
        s.pairs += b
        s.unjudged_pairs += len(unjudged)
        rewards = [0.0] * (2 * b)
        how: list[str] = []
        for i, verdicts in enumerate(history):
            s.tie_rounds += len(verdicts) - 1
            for v in verdicts:
                s.ties += v.winner is None and v.tie
                s.judge_failures += v.winner is None and not v.tie
                if v.swap_agreement is not None:
                    s.swap_checked += 1
                    s.swap_agreed += v.swap_agreement
            final = verdicts[-1] if verdicts else None
            if final is not None and final.winner is not None:
                first, way = final.winner == "A", "judge"
                s.decided_by_judge += 1
                s.decided_after_ties += len(verdicts) > 1
            else:
                known = [v.p_a for v in verdicts if v.p_a is not None]
                p_a = fmean(known) if known else 0.5
                if p_a != 0.5:
                    first, way = p_a > 0.5, "p_a"
                    s.decided_by_p_a += 1
                else:
                    first, way = self._rng.random() < 0.5, "coin"
                    s.coin_flips += 1
            s.first_half_wins += first
            rewards[i], rewards[b + i] = (1.0, 0.0) if first else (0.0, 1.0)
            how.append(way)

        delta = {f.name: getattr(s, f.name) - getattr(before, f.name) for f in dataclasses.fields(s)}
        metrics = {
            "pairs": float(b),
            "tie_rounds": float(rounds),
            "rejudged_pairs": float(delta["tie_rounds"]),
            "decided_by_judge_rate": delta["decided_by_judge"] / b,
            "decided_by_p_a": float(delta["decided_by_p_a"]),
            "coin_flips": float(delta["coin_flips"]),
            "judge_failures": float(delta["judge_failures"]),
            "swap_agreement": delta["swap_agreed"] / delta["swap_checked"] if delta["swap_checked"] else float("nan"),
            "first_half_win_rate": delta["first_half_wins"] / b,
            "judge_seconds": seconds,
            "unjudged_pairs": float(len(unjudged)),
        }
        feedback = [vs[-1].feedback if vs else None for vs in history]  # an unjudged pair has no verdict
        responses, markers = texts[1] + texts[2], self.judge.format.markers  # win/loss: no top, diag/top_* read 0
        metrics.update(diagnostics(rewards, responses, list(range(b)) * 2, feedback * 2, top=None, markers=markers))
        metrics.update(checklist_metrics)
        self.last_metrics = metrics
        self._log(metrics, log_metric)
        if log_extra is not None:
            log_extra(f"{self.__name__}_decided_by", how + how)
            feedback = [(vs[-1].feedback if vs else unjudged.get(i)) or "" for i, vs in enumerate(history)]
            log_extra(f"{self.__name__}_feedback", feedback + feedback)
        return rewards

    def _log(self, metrics: dict[str, float], log_metric: Callable[[str, float], None] | None) -> None:
        trainer = self._trainer() if self._trainer is not None else None
        stats = getattr(trainer, "stats", None)
        for key, value in metrics.items():
            name = f"{self.__name__}/{key}"
            if log_metric is not None and value == value:  # NaN: no verdict with both orders decided
                log_metric(name, value)
            if isinstance(stats, dict):
                stats.setdefault(name, []).append(value)


def _pair_texts(prompts: Sequence[Any], completions: Sequence[Any], b: int) -> tuple[Texts, dict[int, str]]:
    """Each pair's (instruction, response A, response B) as the judge reads them, and the reason of each pair
    whose prompt or completions are not text or messages (empty texts: that pair fails alone, settled like any
    pair the judge did not decide)."""
    texts: Texts = ([], [], [])
    unreadable: dict[int, str] = {}
    for i in range(b):
        try:
            row = (
                prompt_text(prompts[i], i),
                completion_text(completions[i], i),
                completion_text(completions[b + i], b + i),
            )
        except InputError as e:
            row, unreadable[i] = ("", "", ""), str(e)
        for column, text in zip(texts, row, strict=True):
            column.append(text)
    return texts, unreadable
