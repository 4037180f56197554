"""Runnable RLHF examples with a Prometheus judge as the reward (``--smoke`` runs on CPU in minutes)."""
