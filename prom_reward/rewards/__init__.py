"""Judge verdicts as rewards for TRL's online trainers: ``PrometheusReward`` / ``AsyncPrometheusReward``
(``reward``) for GRPO and RLOO with their modes (``modes``: absolute, against a reference, round robin in a
group), ``OnlineDPOJudgeReward`` (``online_dpo``), the reward settings (``config``), one sample model
(``samples``), the outage policy that asks the judge again for what its transport failed (``outage``), drift
diagnostics (``diagnostics``), opt-in length control (``length``) and the judge's lifetime across steps (``holder``).

Imports ``core`` and below.
"""
