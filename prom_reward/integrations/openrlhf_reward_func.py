"""The file to give OpenRLHF as ``--reward.remote_url`` (path: ``prom-reward openrlhf-func-path``); it only imports
``reward_func`` from ``prom_reward.integrations.openrlhf_func``, so the judge lives once per process.
"""

from prom_reward.integrations.openrlhf_func import reward_func

__all__ = ["reward_func"]
