"""``PreferenceConfig``: how judge verdicts become DPO preference pairs (strategy, columns, ``min_margin``: score
points for ``best_vs_worst``, ``2 * P(chosen wins) - 1`` for ``all_pairs``).

Example:
    >>> PreferenceConfig(strategy="all_pairs", min_margin=0.5).swap
    True
    >>> PreferenceConfig(strategy="best_of_n")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: strategy: expected one of best_vs_worst, all_pairs, got 'best_of_n'
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.config import ChecklistConfig
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

    strategy: str = "best_vs_worst"
    """``best_vs_worst`` (absolute grades) or ``all_pairs`` (pairwise verdicts)."""

    min_margin: float = 0.0
    """Drop pairs whose ``margin`` is below this (score points, or probability units for all_pairs)."""

    rubric: Any = None
    """One rubric for every row (name, ``Rubric``, dict, file); None = each row's ``rubric_column``."""

    swap: bool = True
    """all_pairs: judge both orders and keep only verdicts on which the two orders agree."""

    max_tie_rounds: int | None = None
    """best_vs_worst: temperature-1.0 re-grading rounds for an all-equal row (None = the judge's own)."""

    num_samples: int | None = None
    """Judge samples per judgment (None = the judge's own ``num_samples``)."""

    layout: str = "wide"
    """``wide``: one row per prompt with a list of completions; ``long``: one row per (prompt, completion),
    consecutive rows with an equal prompt form one group."""

    prompt_column: str = "prompt"
    """Input column with the prompt (a string, or a list of messages)."""

    completions_column: str = "completions"
    """Wide layout: input column with the list of completions (strings, or message lists)."""

    completion_column: str = "completion"
    """Long layout: input column with the one completion of the row."""

    reference_column: str = "reference_answer"
    """Optional input column with a reference answer (str or None)."""

    rubric_column: str = "rubric"
    """Input column with a per-row rubric, used when ``rubric`` is None."""

    keep_columns: tuple[str, ...] = ()
    """Input columns copied unchanged into every pair made from the row (e.g. ``("id",)``)."""

    checklist_column: str = "checklist"
    """Input column with a per-row checklist: where a row has one, each completion is scored by its criteria
    (``prom_reward.preferences.checklists``, docs/checklists.md) instead of by the rubric."""

    checklist_mode: str = "explicit"
    """Checklist rows: ``explicit`` (one judgment per criterion, aggregated) or ``implicit`` (one judgment)."""

    checklist_aggregation: Any = "weighted_mean"
    """Checklist rows: ``weighted_mean``, ``minimum``, ``gate`` or a callable (docs/checklists.md)."""

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy: expected one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if (
            isinstance(self.min_margin, bool)
            or not isinstance(self.min_margin, (int, float))
            or not math.isfinite(self.min_margin)
        ):
            raise ConfigError(f"min_margin: expected a finite number, got {self.min_margin!r}")
        for name in ("max_tie_rounds", "num_samples"):
            v = getattr(self, name)
            low = 0 if name == "max_tie_rounds" else 1
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
                raise ConfigError(f"{name}: expected an int >= {low} or None, got {v!r}")
        if isinstance(self.keep_columns, str):
            object.__setattr__(self, "keep_columns", (self.keep_columns,))
        else:
            object.__setattr__(self, "keep_columns", tuple(self.keep_columns))
        if not isinstance(self.checklist_column, str) or not self.checklist_column:
            raise ConfigError(f"checklist_column: expected a non-empty column name, got {self.checklist_column!r}")
        self.checklist()  # validated here (ConfigError naming the setting)
        clash = sorted(set(self.keep_columns) & set(OUTPUT_COLUMNS))
        if clash:
            raise ConfigError(
                f"keep_columns (--keep-col): {clash} would overwrite output columns; fix: rename them in the input"
            )

    def checklist(self) -> ChecklistConfig:
        """How rows with a checklist are judged (``checklist_mode``, ``checklist_aggregation``)."""
        return ChecklistConfig(self.checklist_mode, self.checklist_aggregation)

    def fingerprint(self) -> dict[str, Any]:
        """The options that change the pairs (a resumed job must share them): every field but the rubric (the job
        records it resolved), ``min_margin`` as a float, a callable aggregation by its name."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "rubric"}
        agg = self.checklist_aggregation
        out.update(min_margin=float(self.min_margin), keep_columns=list(self.keep_columns))
        out["checklist_aggregation"] = getattr(agg, "__qualname__", agg)
        return out
