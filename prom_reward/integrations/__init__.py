"""The judge inside RLHF frameworks' reward loops: per-sample requests micro-batched into judge calls
(``batching``, ``batched_reward``), the HTTP reward server and ``reward_func`` for OpenRLHF (``openrlhf_*``),
``compute_score`` for verl (``verl``), a verifiers judge (``verifiers_judge``), TRL's async rollout loop
(``trl_async``), their settings (``settings``) and start-up checks (``startup``). The core never imports it.
"""

from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, SampleOutcome

__all__ = ["BatchedReward", "FailurePolicy", "SampleOutcome"]
