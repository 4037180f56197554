"""``RewardConfig``: how judge verdicts become scalar rewards.

Modes (a registry; unknown names list the valid ones):

- ``absolute``: the 1..5 grade of each completion. ``score="sample"`` uses one sample,
  ``"mean"`` the mean of ``num_samples`` samples (one request with n=k), ``"expected"``
  the probability-weighted score read at the ``[RESULT]`` token (tie-free, one sample).
- ``pairwise_reference``: each completion against a baseline response from a dataset
  column, both orders; reward = P(completion wins) (``pairwise_reward="probability"``)
  or +1 / -1 / 0 for win / loss / tie (``"sign"``).
- ``pairwise_group``: the completions of one prompt against each other (round robin,
  both orders); reward = win rate (ties count half) or a Bradley-Terry log-strength
  within the group (``group_reward="bradley_terry"``).

Reward paths never fail a batch for one sample (``prom_reward.rewards.guard``): a response
over the judge's context is shortened to fit and counted (``overlong="truncate"``, the default:
a policy that rambles gets a judged, usually low, score rather than an abstention it could learn
to exploit) or fails alone (``"fail"``); a failing judge is retried per ``outage``
(``prom_reward.backends.outage.OutagePolicy``; TRL's default: stop with the cause past the budget).

Normalisation (off by default: GRPO and RLOO normalise per group anyway):
``"unit"`` maps to [0, 1] (1..5 -> (s-1)/4; +1/-1 -> 1/0), ``"symmetric"`` to [-1, 1]
(1..5 -> (s-3)/2; P -> 2P-1). Bradley-Terry scores are unbounded, so they take none.

Example:
    >>> RewardConfig(mode="absolute", score="mean", num_samples=3).num_samples
    3
    >>> RewardConfig(mode="pairwise").mode  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: mode: unknown reward mode 'pairwise'; valid names: absolute, pairwise_group, pairwise_reference
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prom_reward.backends.outage import OutagePolicy
from prom_reward.errors import ConfigError, UnknownNameError
from prom_reward.registry import Registry

MODES: Registry[str] = Registry("reward mode")
for _m in ("absolute", "pairwise_reference", "pairwise_group"):
    MODES.register(_m, _m)

_CHOICES = {
    "score": ("sample", "mean", "expected"),
    "pairwise_reward": ("probability", "sign"),
    "group_reward": ("win_rate", "bradley_terry"),
}
NORMALIZATIONS = (None, "unit", "symmetric")
OVERLONG = ("truncate", "fail")


@dataclass(frozen=True)
class RewardConfig:
    """Options of ``PrometheusReward`` (see the module docstring for the modes)."""

    mode: str = "absolute"
    """``absolute``, ``pairwise_reference`` or ``pairwise_group``."""

    score: str = "sample"
    """Absolute mode: ``sample`` (one sample), ``mean`` (of num_samples), ``expected`` (from logprobs)."""

    num_samples: int = 3
    """Samples per completion for ``score="mean"``."""

    pairwise_reward: str = "probability"
    """pairwise_reference: ``probability`` (P(completion wins)) or ``sign`` (+1/-1, 0 for a tie)."""

    group_reward: str = "win_rate"
    """pairwise_group: ``win_rate`` or ``bradley_terry``."""

    normalize: str | None = None
    """None (raw), ``unit`` ([0, 1]) or ``symmetric`` ([-1, 1])."""

    rubric: Any = "helpfulness"
    """Rubric used when a row has none: built-in name, Rubric, dict or file path."""

    reference_answer: str | None = None
    """Reference answer used when a row has none (None = grade without reference)."""

    rubric_column: str = "rubric"
    """Dataset column with a per-row rubric (used when present)."""

    reference_column: str = "reference_answer"
    """Dataset column with a per-row reference answer (used when present)."""

    instruction_column: str = "instruction"
    """Dataset column with the instruction to show the judge instead of the prompt (when present)."""

    baseline_column: str = "baseline"
    """pairwise_reference: dataset column with the baseline response each completion is compared to."""

    log_feedback: bool = True
    """Send the judge's feedback to the trainer's completions table (``log_extra``)."""

    name: str = "prometheus"
    """Name of the reward in the trainer's logs (``rewards/<name>/...``)."""

    overlong: str = "truncate"
    """A response over the judge's context: ``truncate`` (shorten it to fit, counted in
    ``truncated_responses``) or ``fail`` (that sample alone gets no reward, with the reason)."""

    outage: OutagePolicy = field(default_factory=OutagePolicy)
    """How a failing judge is retried, and what happens past the budget (``OutagePolicy``)."""

    def __post_init__(self) -> None:
        try:
            MODES.get(self.mode)
        except UnknownNameError as e:
            raise ConfigError(f"mode: {e}") from e
        for name, valid in _CHOICES.items():
            if getattr(self, name) not in valid:
                raise ConfigError(f"{name}: expected one of {', '.join(valid)}, got {getattr(self, name)!r}")
        if self.normalize not in NORMALIZATIONS:
            raise ConfigError(f"normalize: expected None, 'unit' or 'symmetric', got {self.normalize!r}")
        if not isinstance(self.num_samples, int) or self.num_samples < 1:
            raise ConfigError(f"num_samples: expected an int >= 1, got {self.num_samples!r}")
        if self.mode == "pairwise_group" and self.group_reward == "bradley_terry" and self.normalize:
            raise ConfigError("normalize: Bradley-Terry scores are unbounded; use normalize=None with them "
                              "(or group_reward='win_rate', which lies in [0, 1])")
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"name: expected a non-empty string, got {self.name!r}")
        if self.overlong not in OVERLONG:
            raise ConfigError(f"overlong: expected one of {', '.join(OVERLONG)}, got {self.overlong!r}")
        if not isinstance(self.outage, OutagePolicy):
            raise ConfigError(f"outage: expected an OutagePolicy, got {type(self.outage).__name__}")


def normalize_value(value: float | None, kind: str, how: str | None) -> float | None:
    """Map a raw reward of ``kind`` (``grade`` 1..5, ``probability`` 0..1, ``sign`` -1..1) to ``how``.

    >>> normalize_value(5.0, "grade", "unit"), normalize_value(1.0, "grade", "symmetric")
    (1.0, -1.0)
    >>> normalize_value(0.75, "probability", "symmetric")
    0.5
    """
    if value is None or how is None:
        return value
    lo, hi = {"grade": (1.0, 5.0), "probability": (0.0, 1.0), "sign": (-1.0, 1.0)}[kind]
    unit = (value - lo) / (hi - lo)
    return unit if how == "unit" else 2.0 * unit - 1.0
