"""``PreferenceConfig``: how judge verdicts become DPO preference pairs (strategy, columns, ``min_margin``: score
points for ``best_vs_worst``, ``2 * P(chosen wins) - 1`` for ``all_pairs``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.aggregate import CHECKLIST_MODES, ChecklistConfig, checklist_config
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError

STRATEGIES = ("best_vs_worst", "all_pairs")
STRATEGY_COLUMNS = {
    "best_vs_worst": ("feedback_chosen", "feedback_rejected", "tie_rounds"),
    "all_pairs": ("feedback", "swap_agreement"),
}
"""The output columns of one strategy's pairs only."""
OUTPUT_COLUMNS = (
    "source_index",
    "prompt",
    "chosen",
    "rejected",
    "score_chosen",
    "score_rejected",
    "margin",
    "chosen_index",
    "rejected_index",
    *(c for s in STRATEGIES for c in STRATEGY_COLUMNS[s]),
)
LAYOUTS = ("wide", "long")


@dataclass(frozen=True)
class PreferenceConfig:
    """Options of DPO pairs (``build_preference_dataset``, ``prom_reward.jobs.pairs``; validated on construction)."""

    strategy: str = setting(
        "best_vs_worst",
        help="``best_vs_worst`` (absolute grades) or ``all_pairs`` (pairwise verdicts).",
        choices=STRATEGIES,
    )
    min_margin: float = setting(
        0.0, help="Drop pairs whose ``margin`` is below this (score points, or probability units for all_pairs)."
    )
    rubric: Any = setting(
        None, help="One rubric for every row (name, ``Rubric``, dict, file); None = each row's ``rubric_column``."
    )
    swap: bool = setting(
        True, help="all_pairs: judge both orders and keep only verdicts on which the two orders agree."
    )
    max_tie_rounds: int | None = setting(
        None,
        help="best_vs_worst: temperature-1.0 re-grading rounds for an all-equal row (None = the judge's own).",
        ge=0,
    )
    num_samples: int | None = setting(
        None, help="Judge samples per judgment (None = the judge's own ``num_samples``).", ge=1
    )
    layout: str = setting(
        "wide",
        help="""``wide``: one row per prompt with a list of completions; ``long``: one row per (prompt, completion),
        consecutive rows with an equal prompt form one group.""",
        choices=LAYOUTS,
    )
    prompt_column: str = setting(
        "prompt", help="Input column with the prompt (a string, or a list of messages).", nonempty=True
    )
    completions_column: str = setting(
        "completions",
        help="Wide layout: input column with the list of completions (strings, or message lists).",
        nonempty=True,
    )
    completion_column: str = setting(
        "completion", help="Long layout: input column with the one completion of the row.", nonempty=True
    )
    reference_column: str = setting(
        "reference_answer", help="Optional input column with a reference answer (str or None).", nonempty=True
    )
    rubric_column: str = setting(
        "rubric", help="Input column with a per-row rubric, used when ``rubric`` is None.", nonempty=True
    )
    keep_columns: tuple[str, ...] = setting(
        (), help='Input columns copied unchanged into every pair made from the row (e.g. ``("id",)``).'
    )
    checklist_column: str = setting(
        "checklist",
        help="""Input column with a per-row checklist: where a row has one, each completion is scored by its
        criteria (``prom_reward.preferences.strategies``, docs/checklists.md) instead of by the rubric.""",
        nonempty=True,
    )
    checklist_mode: str = setting(
        "explicit",
        help="Checklist rows: ``explicit`` (one judgment per criterion, aggregated) or ``implicit`` (one judgment).",
        choices=CHECKLIST_MODES,
    )
    checklist_aggregation: Any = setting(
        "weighted_mean",
        help="Checklist rows: ``weighted_mean``, ``minimum``, ``gate`` or a callable (docs/checklists.md).",
    )

    def __post_init__(self) -> None:
        keep = (self.keep_columns,) if isinstance(self.keep_columns, str) else tuple(self.keep_columns)
        object.__setattr__(self, "keep_columns", keep)
        check(self)
        self.checklist()  # validated here (ConfigError naming the setting)
        clash = sorted(set(self.keep_columns) & set(OUTPUT_COLUMNS))
        if clash:
            raise ConfigError(f"{clash} would overwrite output columns; fix: rename them in the input", "keep_columns")

    def checklist(self) -> ChecklistConfig:
        """How rows with a checklist are judged (``checklist_mode``, ``checklist_aggregation``)."""
        return checklist_config(self.checklist_mode, self.checklist_aggregation)
