"""The file to give OpenRLHF as ``--reward.remote_url`` (path: ``prom-reward openrlhf-func-path``).

OpenRLHF loads this file by path as a fresh module; it only imports ``reward_func`` so the
judge and its batching queue live once per process in ``prom_reward.integrations.openrlhf_func``.
Configure it with ``PROM_REWARD_*`` environment variables (see that module).
"""

from prom_reward.integrations.openrlhf_func import reward_func

__all__ = ["reward_func"]
