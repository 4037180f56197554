"""The file to give OpenRLHF as ``--reward.remote_url`` (``prom-reward openrlhf-func-path``); it imports
``reward_func`` only, so the judge lives once per process."""

from prom_reward.integrations.openrlhf_func import reward_func

__all__ = ["reward_func"]
