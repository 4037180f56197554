"""The built-in judge formats, one module each; importing this package registers them in
``prom_reward.format.judge_format.JUDGE_FORMATS``.

- ``prometheus2``: Prometheus 2's prompts and ``[RESULT]`` verdicts (``prometheus2``, the default, and
  ``m-prometheus``).
- ``flow_judge``: Flow-Judge v0.1's ``<feedback>``/``<score>`` prompts on its 5-point, 3-point and binary
  scales (``flow-judge``, ``flow-judge-3``, ``flow-judge-binary``).
"""

from prom_reward.format.formats import flow_judge, prometheus2

__all__ = ["flow_judge", "prometheus2"]
