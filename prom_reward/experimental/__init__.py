"""Experimental features: their API may change in any release, and each has a benchmark that shows what it
does and what it does not do (``docs/experimental.md``). Nothing else in ``prom_reward`` imports this package:
core, rewards, jobs and integrations work without it, and a reward takes an experimental judge like any other.

- ``CascadeJudge`` (``cascade``; its routing rules in ``routing``): a cheap judge judges everything, its least
  confident items go to a second judge. ``benchmarks/confidence_eval.py`` (pocket judge on CPU) showed the
  path works end to end and the routed share holds over a run; routing to a weaker real second judge
  (SmolLM2-135M) bought nothing, and no stronger second judge was measured, so no gain is shown.
- SE-Cali (``calibration``: ``calibrated_judge``, ``BaseModelReader``): a base model reads the judge's outputs
  by teacher forcing; its entropy is subtracted from the judge's. On 80 Vicuna dev items its confident half
  correlated better with GPT-4 than its unsure half (0.165 vs -0.257, 36 items a half): within noise.

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
