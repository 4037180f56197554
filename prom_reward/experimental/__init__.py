"""Experimental features (API may change in any release; each has a benchmark in docs/experimental.md): the
judge cascade (``CascadeJudge``, ``routing``) and SE-Cali (``calibrated_judge``, ``BaseModelReader``).
Nothing else in ``prom_reward`` imports this package.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> cheap = PrometheusJudge(backend="scripted", outputs=["[RESULT] 3"] * 3 + ["[RESULT] 1"], num_samples=2)
    >>> better = PrometheusJudge(backend="scripted", outputs=["[RESULT] 2"])
    >>> cascade = CascadeJudge(cheap, better, threshold=0.25, indicator="sample_agreement")  # samples that disagree
    >>> [(g.score, g.decided_by) for g in cascade.grade(["q1", "q2"], ["r1", "r2"], "helpfulness")]
    [(3.0, 'primary'), (2.0, 'fallback')]
    >>> cascade.stats.counters["cascade_routed"]
    1
"""

from prom_reward.experimental.calibration import BaseModelReader, calibrated_judge
from prom_reward.experimental.cascade import CascadeJudge
from prom_reward.experimental.routing import CascadeConfig, CascadeStats, Routing, route

__all__ = [
    "BaseModelReader",
    "CascadeConfig",
    "CascadeJudge",
    "CascadeStats",
    "Routing",
    "calibrated_judge",
    "route",
]
