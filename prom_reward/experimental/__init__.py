"""Experimental features (API may change in any release; each has a benchmark in docs/experimental.md): the
judge cascade (``CascadeJudge``, ``routing``) and SE-Cali (``calibrated_judge``, ``BaseModelReader``). Nothing
else in ``prom_reward`` imports this package."""

from prom_reward.experimental.calibration import BaseModelReader, calibrated_judge
from prom_reward.experimental.cascade import CascadeConfig, CascadeJudge, CascadeStats, Routing, route

__all__ = [
    "BaseModelReader",
    "CascadeConfig",
    "CascadeJudge",
    "CascadeStats",
    "Routing",
    "calibrated_judge",
    "route",
]
