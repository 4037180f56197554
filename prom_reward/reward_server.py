"""Backward-compatible home of the OpenRLHF reward server; it lives in
``prom_reward.integrations.openrlhf_server`` now (the judging core imports no integration).

Example:
    >>> from prom_reward.reward_server import create_app
    >>> create_app.__module__
    'prom_reward.integrations.openrlhf_server'
"""

from .integrations.openrlhf_server import (  # noqa: F401
    DEFAULT_MAX_BODY_BYTES,
    ServerConfig,
    create_app,
    serve_reward,
    split_queries,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ServerConfig", "create_app", "serve_reward", "split_queries"]
