"""prom-reward: Prometheus-style judge models as rewards for RLHF training loops.

Example:
    >>> from prom_reward import GradeItem, PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Correct and clear. [RESULT] 4"] * 2)
    >>> judge.grade_items([GradeItem("Name a prime.", "7", "helpfulness")])[0].score
    4.0
    >>> judge.grade(["Name a prime."], ["7"], "helpfulness")[0].score  # the same, from parallel lists
    4.0
"""

import importlib.util
from typing import TYPE_CHECKING

from prom_reward.backends.sampling import SamplingConfig
from prom_reward.confidence.indicators import Confidence
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.protocol import Judge, JudgeCapabilities
from prom_reward.core.results import Grade, JudgeFailure, JudgeSample, JudgeStats, Verdict
from prom_reward.errors import (
    BackendError,
    ConfigError,
    ContextLengthError,
    InputError,
    JudgeConfigError,
    JudgeUnavailableError,
    PromRewardError,
    UnknownNameError,
)
from prom_reward.format.judge_format import JudgeFormat, Prompt, get_judge_format
from prom_reward.format.parsing import parse_absolute, parse_output, parse_relative
from prom_reward.format.render import render_absolute, render_relative
from prom_reward.format.rubrics import Rubric, get_rubric
from prom_reward.jobs.pairs import build_preference_dataset
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward, PairwiseRewardStats
from prom_reward.rewards.outage import OutagePolicy
from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward

if TYPE_CHECKING:  # imported on first use by ``__getattr__`` below; named here for type checkers and the API docs
    from prom_reward.integrations.verifiers_judge import PrometheusVerifiersJudge as PrometheusVerifiersJudge

__version__ = "0.1.0"


_OPTIONAL = {"PrometheusVerifiersJudge": ("verifiers", "prom_reward.integrations.verifiers_judge")}
"""Names needing a package of no extra (name -> (package, module)): imported on first use, in ``__all__`` if found."""


def __getattr__(name: str) -> object:
    """An ``_OPTIONAL`` name, imported on first use."""
    if name in _OPTIONAL:
        return getattr(importlib.import_module(_OPTIONAL[name][1]), name)
    raise AttributeError(f"module 'prom_reward' has no attribute {name!r}")


__all__ = [
    "AsyncPrometheusReward",
    "BackendError",
    "Confidence",
    "ConfigError",
    "ContextLengthError",
    "Grade",
    "GradeItem",
    "InputError",
    "Judge",
    "JudgeCapabilities",
    "JudgeConfigError",
    "JudgeFailure",
    "JudgeFormat",
    "JudgeSample",
    "JudgeStats",
    "JudgeUnavailableError",
    "OnlineDPOJudgeReward",
    "OutagePolicy",
    "PairItem",
    "PairwiseRewardStats",
    "PreferenceConfig",
    "PromRewardError",
    "PrometheusJudge",
    "PrometheusReward",
    "Prompt",
    "RewardConfig",
    "Rubric",
    "SamplingConfig",
    "UnknownNameError",
    "Verdict",
    "build_preference_dataset",
    "get_judge_format",
    "get_rubric",
    "parse_absolute",
    "parse_output",
    "parse_relative",
    "render_absolute",
    "render_relative",
]
__all__ += [name for name, (package, _) in _OPTIONAL.items() if importlib.util.find_spec(package) is not None]
__all__.sort()
