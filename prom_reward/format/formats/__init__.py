"""The built-in judge formats, one module each; importing this package registers them in
``prom_reward.format.judge_format.JUDGE_FORMATS``.

- ``prometheus2``: Prometheus 2's prompts and ``[RESULT]`` verdicts (``prometheus2``, the default, and
  ``m-prometheus``).
- ``flow_judge``: Flow-Judge v0.1's ``<feedback>``/``<score>`` prompts on its 5-point, 3-point and binary
  scales (``flow-judge``, ``flow-judge-3``, ``flow-judge-binary``).
- ``pairwise``: rewardbench's pairwise judges (``selene``, ``mt-bench-pairwise``, ``offsetbias``,
  ``rise-judge``); ``con_j``: ``con-j``; ``rm_r1``: RM-R1's reasoning judge (``rm-r1``, ``rm-r1-reasoning``).
- ``from_yaml``: a format defined by a YAML file (``--format my_judge.yaml``; its schema: ``yaml_schema``).
"""

from prom_reward.format.formats import con_j, flow_judge, from_yaml, pairwise, prometheus2, rm_r1

__all__ = ["con_j", "flow_judge", "from_yaml", "pairwise", "prometheus2", "rm_r1"]
