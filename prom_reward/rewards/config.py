"""``RewardConfig``: how judge verdicts become scalar rewards (the modes, normalisation, length control and
failure reward are described in docs/rewards.md), and the reward's scale (``reward_scale``, ``failure_value``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from prom_reward.checklist.aggregate import CHECKLIST_MODES, ChecklistConfig, checklist_config
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, UnknownNameError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, get_judge_format
from prom_reward.rewards.outage import OutagePolicy

MODES = ("absolute", "pairwise_reference", "pairwise_group")


@dataclass(frozen=True)
class RewardConfig:
    """Options of every reward path (docs/rewards.md has the modes)."""

    mode: str = setting("absolute", help="``absolute``, ``pairwise_reference`` or ``pairwise_group``.", choices=MODES)
    score: str = setting(
        "sample",
        help="Absolute mode: ``sample`` (one sample), ``mean`` (of num_samples), ``expected`` (from logprobs).",
        choices=("sample", "mean", "expected"),
    )
    num_samples: int = setting(3, help='Samples per completion for ``score="mean"``.', ge=1)
    pairwise_reward: str = setting(
        "probability",
        help="pairwise_reference: ``probability`` (P(completion wins)) or ``sign`` (+1/-1, 0 for a tie).",
        choices=("probability", "sign"),
    )
    group_reward: str = setting(
        "win_rate", help="pairwise_group: ``win_rate`` or ``bradley_terry``.", choices=("win_rate", "bradley_terry")
    )
    normalize: str | None = setting(
        None, help="None (raw), ``unit`` ([0, 1]) or ``symmetric`` ([-1, 1]).", choices=(None, "unit", "symmetric")
    )
    rubric: Any = setting(
        "helpfulness", help="Rubric used when a row has none: built-in name, Rubric, dict or file path."
    )
    reference_answer: str | None = setting(
        None, help="Reference answer used when a row has none (None = grade without reference)."
    )
    rubric_column: str = setting(
        "rubric", help="Dataset column with a per-row rubric (used when present).", nonempty=True
    )
    reference_column: str = setting(
        "reference_answer", help="Dataset column with a per-row reference answer (used when present).", nonempty=True
    )
    instruction_column: str = setting(
        "instruction",
        help="Dataset column with the instruction to show the judge instead of the prompt (when present).",
        nonempty=True,
    )
    baseline_column: str = setting(
        "baseline",
        help="pairwise_reference: dataset column with the baseline response each completion is compared to.",
        nonempty=True,
    )
    checklist_column: str = setting(
        "checklist",
        help="""Dataset column with a per-row checklist of criteria (used when present; docs/checklists.md): the row
        is judged per criterion and rewarded by ``checklist_aggregation`` instead of by one rubric.""",
        nonempty=True,
    )
    checklist_mode: str = setting(
        "explicit",
        help="""Checklist rows: ``explicit`` (one judgment per criterion, aggregated) or ``implicit`` (the whole
        checklist as one rubric, one judgment per response).""",
        choices=CHECKLIST_MODES,
    )
    checklist_aggregation: Any = setting(
        "weighted_mean",
        help="""Checklist rows, explicit mode: ``weighted_mean``, ``minimum``, ``gate`` or a callable
        ``f(scores) -> float | None`` (docs/checklists.md has each formula).""",
    )
    log_feedback: bool = setting(
        True, help="Send the judge's feedback to the trainer's completions table (``log_extra``)."
    )
    name: str = setting(
        "prometheus", help="Name of the reward in the trainer's logs (``rewards/<name>/...``).", nonempty=True
    )
    over_context: str = setting(
        "truncate",
        help="""A response over the judge's context: ``truncate`` (shorten it to fit, counted in
        ``truncated_responses``) or ``fail`` (that sample alone gets no reward, with the reason).""",
        choices=("truncate", "fail"),
    )
    outage: OutagePolicy = setting(
        factory=OutagePolicy,
        help="How a failing judge is retried, and what happens past the budget (``OutagePolicy``).",
    )
    length_correction: bool = setting(
        False,
        help="""Within each prompt's completions, subtract the least-squares fit of reward on log(length) (keeps
        the group's mean; opt-in: it also removes reward that length earned honestly).""",
    )
    length_min_group: int = setting(
        4,
        help="""``length_correction``: smallest group (scored completions) that is corrected; smaller groups are
        left as they are (a fit through 2 or 3 points explains nearly any difference).""",
        ge=3,
        note="a fit through 2 points explains any difference",
    )
    overlong_penalty: float = setting(
        0.0,
        help="""Reward taken from a completion at ``2 * overlong_ratio`` times the baseline length or longer
        (linear from ``overlong_ratio`` times it); 0 turns the penalty off.""",
        ge=0,
        note="0 = off",
    )
    overlong_baseline: float | str = setting(
        "group_median",
        help="""The baseline length of ``overlong_penalty``: ``"group_median"`` (median characters of the
        prompt's completions) or a number of characters.""",
        choices=("group_median",),
        gt=0,
    )
    overlong_ratio: float = setting(
        1.5, help="``overlong_penalty`` starts at this many times the baseline length (> 0).", gt=0
    )
    failure_reward: float | str | None = setting(
        None,
        help="""The reward of a sample the judge could not judge, where a framework needs a number (OpenRLHF,
        verl): a number at most the top of this reward's scale (``reward_scale``: 1..5 raw grades, [0, 1] with
        ``normalize="unit"`` ...) or ``"min"`` (the lowest of the scale); None: no number (TRL leaves such a
        sample out). A number above the scale is refused: a failed sample would outrank every judged one.""",
    )
    format: str | None = setting(
        None,
        help="""The judge format (``prometheus2``, ``m-prometheus`` ...: docs/formats.md) of a judge built from
        options; a judge passed in must be in it. None: the judge's own (its preset's, else prometheus2). The reward
        checks it at construction against what it asks (a pairwise-only format cannot grade) and
        ``score="expected"``.""",
    )

    def __post_init__(self) -> None:
        if self.failure_reward is not None:  # says what it takes: a finite number or 'min', on this reward's scale
            failure_value(self.failure_reward, self)
        check(self)
        if self.mode == "pairwise_group" and self.group_reward == "bradley_terry" and self.normalize:
            raise ConfigError(
                "Bradley-Terry scores are unbounded; use normalize=None with them "
                "(or group_reward='win_rate', which lies in [0, 1])",
                "normalize",
            )
        if self.format is not None:
            get_judge_format_setting(self.format)  # what it can judge is checked by the reward against its judge
        self.checklist()

    def checklist(self) -> ChecklistConfig:
        """How checklist rows are judged; raises ``ConfigError`` naming the setting."""
        return checklist_config(self.checklist_mode, self.checklist_aggregation, self.score, self.num_samples)


def reward_config(config: Any, options: dict[str, Any], owner: str, **defaults: Any) -> RewardConfig:
    """A reward's ``config``, else the ``RewardConfig`` of its keyword ``options`` over ``defaults`` (not both)."""
    if config is not None and (options or not isinstance(config, RewardConfig)):
        raise ConfigError(
            f"config: expected a RewardConfig and no reward fields beside it, got {type(config).__name__} and "
            f"{sorted(options)}; fix: {owner}(judge, RewardConfig(...)) or its fields as keywords (rubric='honesty')"
        )
    return config or RewardConfig(**{**defaults, **options})


def reward_scale(config: RewardConfig) -> tuple[float, float] | None:
    """The lowest and highest reward ``config`` gives (before length control); None for Bradley-Terry."""
    if config.mode == "pairwise_group" and config.group_reward == "bradley_terry":
        return None
    kind = {"absolute": "grade", "pairwise_reference": config.pairwise_reward}.get(config.mode, "probability")
    grades = grade_range(get_judge_format_setting(config.format or DEFAULT_FORMAT))
    lo, hi = (normalize_value(v, kind, config.normalize, grades) for v in (grades if kind == "grade" else _RAW[kind]))
    return lo, hi  # type: ignore[return-value]


def failure_value(value: float | str, config: RewardConfig | None) -> float:
    """The number of a failed sample: ``value`` (a number, or ``"min"``: the lowest of ``reward_scale(config)``);
    a number above the scale's top would let a failed sample outrank every judged one (``ConfigError``)."""
    scale = reward_scale(config) if config is not None else None
    if isinstance(value, str) and value.strip().lower() == "min":
        if scale is None:
            raise ConfigError(
                "'min': Bradley-Terry scores are unbounded and have no lowest value; fix: give a number",
                "failure_reward",
            )
        return scale[0]
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"expected a number or 'min', got {value!r}; fix: give a number or 'min'", "failure_reward"
        ) from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ConfigError(f"expected a finite number or 'min', got {value!r}", "failure_reward")
    if scale is not None and config is not None and number > scale[1]:
        where = f"mode {config.mode}" + (f", normalize {config.normalize}" if config.normalize else "")
        raise ConfigError(
            f"{value!r} is above the reward's scale {scale[0]:g}..{scale[1]:g} ({where}): a sample "
            f"the judge failed on would outrank every judged one; fix: give a number of at most {scale[1]:g} "
            f"(at or below {scale[0]:g} to rank a failure last) or 'min' (the lowest of the scale)",
            "failure_reward",
        )
    return number


_RAW = {"grade": (1.0, 5.0), "probability": (0.0, 1.0), "sign": (-1.0, 1.0)}


def grade_range(fmt: JudgeFormat | None) -> tuple[float, float]:
    """The lowest and highest grade of judge format ``fmt``'s scale; 1..5 for None or a pairwise-only format."""
    scale = fmt.scale if fmt is not None else ()
    return (float(min(scale)), float(max(scale))) if scale else _RAW["grade"]


def normalize_value(
    value: float | None, kind: str, how: str | None, grades: tuple[float, float] = _RAW["grade"]
) -> float | None:
    """Map a raw reward of ``kind`` (``grade`` on the scale ``grades``, ``probability``, ``sign``) to ``how``."""
    if value is None or how is None:
        return value
    lo, hi = grades if kind == "grade" else _RAW[kind]
    unit = (value - lo) / (hi - lo)
    return unit if how == "unit" else 2.0 * unit - 1.0


def get_judge_format_setting(name: object) -> JudgeFormat:
    """The judge format a ``format`` setting names; ``ConfigError`` listing the valid names otherwise."""
    try:
        return get_judge_format(name)  # type: ignore[arg-type]
    except (UnknownNameError, ConfigError) as e:
        raise ConfigError(str(e), "format") from e
