"""The judge inside RLHF frameworks' reward loops (OpenRLHF, verl, verifiers, TRL's async loop): per-sample
requests micro-batched into judge calls, and their settings. The core never imports it."""

from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy, SampleOutcome

__all__ = ["BatchedReward", "FailurePolicy", "SampleOutcome"]
