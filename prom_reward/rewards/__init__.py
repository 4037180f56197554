"""Judge verdicts as rewards for TRL's online trainers (``PrometheusReward``, ``OnlineDPOJudgeReward``): their
settings, sample model, modes, outage policy, start-up check, diagnostics and length control. Imports ``core``
and below."""
