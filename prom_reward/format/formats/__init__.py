"""The built-in judge formats, one module each; importing this package registers them in
``prom_reward.format.judge_format.JUDGE_FORMATS``.

- ``prometheus2``: Prometheus 2's prompts and ``[RESULT]`` verdicts (``prometheus2``, the default, and
  ``m-prometheus``).
"""

from prom_reward.format.formats import prometheus2

__all__ = ["prometheus2"]
