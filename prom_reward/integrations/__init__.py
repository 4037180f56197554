"""The judge inside RLHF frameworks' reward loops (OpenRLHF, verl): per-sample requests micro-batched into
judge calls, the HTTP reward server, OpenRLHF's ``reward_func`` and verl's ``compute_score``. The judging
core never imports this package.

- ``batching``: ``MicroBatcher`` (concurrent requests -> one batched call).
- ``batched_reward``: ``BatchedReward`` (concurrent single-sample callers -> one judge call),
  ``JudgeJob``, ``JobResult``, ``FailurePolicy``.
- ``openrlhf_server``: the HTTP reward server for OpenRLHF's ``--reward.remote_url http://...``.
- ``openrlhf_func``: ``reward_func`` for OpenRLHF's ``--reward.remote_url path/to/file.py``
  (the file to point at: ``openrlhf_reward_func.py``).
- ``openrlhf_inputs``: OpenRLHF queries (left-truncated prompts too) and labels -> judge jobs, and the reply dict.
- ``verl``: ``compute_score`` for verl's ``reward.custom_reward_function``.
"""

from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, JobResult, JudgeJob

__all__ = ["BatchedReward", "FailurePolicy", "JobResult", "JudgeJob"]
