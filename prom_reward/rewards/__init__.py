"""Judge verdicts as rewards for TRL's online trainers: ``PrometheusReward`` / ``AsyncPrometheusReward``
(``reward``) and their modes (``modes``), ``OnlineDPOJudgeReward`` (``online_dpo``), settings (``config``), the
sample model (``samples``), the outage policy (``outage``), drift diagnostics (``diagnostics``), length control
(``length``) and the judge's lifetime (``holder``). Imports ``core`` and below.
"""
