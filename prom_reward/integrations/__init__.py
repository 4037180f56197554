"""The judge inside RLHF frameworks' reward loops (OpenRLHF, verl): per-sample requests micro-batched into
judge calls, the HTTP reward server, OpenRLHF's ``reward_func`` and verl's ``compute_score``. The judging
core never imports this package.

- ``settings``: ``RewardSettings``, the one settings model of the three paths (explicit > environment > YAML).
- ``batching``: ``MicroBatcher`` (concurrent requests -> batched calls, several in flight).
- ``batched_reward``: ``BatchedReward`` (concurrent single-sample callers -> one judge call),
  ``SampleOutcome``, ``FailurePolicy``.
- ``startup``: the checks a reward path runs before serving (judge reachable, model served).
- ``openrlhf_server``: the HTTP reward server for OpenRLHF's ``--reward.remote_url http://...``.
- ``openrlhf_func``: ``reward_func`` for OpenRLHF's ``--reward.remote_url path/to/file.py``
  (the file to point at: ``openrlhf_reward_func.py``).
- ``openrlhf_inputs``: OpenRLHF queries (left-truncated prompts too) and labels -> ``RewardSample``s, and the
  reply dict.
- ``verl``: ``compute_score`` for verl's ``reward.custom_reward_function``.
- ``verifiers_judge``: ``PrometheusVerifiersJudge``, a verifiers v1 judge (plugged as ``prom-reward`` or called
  from a task's ``@reward``); imports verifiers, so nothing here imports it.
"""

from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, SampleOutcome

__all__ = ["BatchedReward", "FailurePolicy", "SampleOutcome"]
