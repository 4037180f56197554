"""Integrations with RLHF frameworks (OpenRLHF, verl): each module here may import its framework's
conventions; the judging core (``prom_reward.*`` outside this package) never imports them.

- ``batched_reward``: ``BatchedReward`` (concurrent single-sample callers -> one judge call),
  ``JudgeJob``, ``JobResult``, ``FailurePolicy``.
- ``openrlhf_server``: the HTTP reward server for OpenRLHF's ``--reward.remote_url http://...``.
- ``openrlhf_func``: ``reward_func`` for OpenRLHF's ``--reward.remote_url path/to/file.py``
  (the file to point at: ``openrlhf_reward_func.py``).
- ``openrlhf_inputs``: OpenRLHF queries (left-truncated prompts too) and labels -> judge jobs, and the reply dict.
- ``verl``: ``compute_score`` for verl's ``reward.custom_reward_function``.
- ``ray_grade``: ``grade_dataset`` / ``pairs_dataset``, offline judging on Ray Data (``prom-reward grade|pairs
  --ray``); ``ray_config`` (``RayJobConfig``, ``RaySummary``) and ``ray_shards`` (stable row ids, part files).
"""

from .batched_reward import BatchedReward, FailurePolicy, JobResult, JudgeJob

__all__ = ["BatchedReward", "FailurePolicy", "JobResult", "JudgeJob"]
