"""prom-reward: Prometheus-style judge models as rewards for RLHF training loops.

Example:
    >>> from prom_reward import PrometheusJudge, Rubric
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Correct and clear. [RESULT] 4"])
    >>> judge.grade(["Name a prime."], ["7"], "helpfulness")[0].score
    4.0
"""

from .errors import (BackendError, ConfigError, ContextLengthError, InputError, PromRewardError,
                     UnknownNameError)
from .cascade import CascadeJudge
from .confidence import Confidence
from .judge import JudgeStats, PrometheusJudge
from .online_dpo import OnlineDPOJudgeReward, PairwiseRewardStats
from .parsing import parse_absolute, parse_output, parse_relative
from .preferences import PreferenceConfig, PreferenceStats, build_preference_dataset
from .prompts import render_absolute, render_relative
from .results import Grade, JudgeSample, Verdict
from .reward import AsyncPrometheusReward, PrometheusReward
from .reward_config import RewardConfig
from .rubrics import Rubric, get_rubric
from .sampling import SamplingConfig

__version__ = "0.1.0"

__all__ = [
    "AsyncPrometheusReward", "CascadeJudge", "Confidence", "PreferenceConfig", "PreferenceStats", "build_preference_dataset", "OnlineDPOJudgeReward", "PairwiseRewardStats", "PrometheusReward", "RewardConfig",
    "BackendError", "ConfigError", "ContextLengthError", "Grade", "InputError", "JudgeSample", "JudgeStats",
    "PromRewardError", "PrometheusJudge", "Rubric", "SamplingConfig", "UnknownNameError", "Verdict",
    "get_rubric", "parse_absolute", "parse_output", "parse_relative", "render_absolute", "render_relative",
]
