"""Conveniences for running on one machine without a model hub: CPU defaults for vLLM (``cpu_defaults``), local
models (``models``) and finding the pocket judge ``make setup`` builds (``pocket_judge``).
The bottom layer, beside ``errors``: imports nothing else of prom_reward.
"""
