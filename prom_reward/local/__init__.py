"""Conveniences for running on one machine without a model hub: CPU defaults for vLLM
(``cpu_defaults``), local models (``models``: SmolLM2-135M-Instruct converted from its PyPI package, the
tiny test Llama) and finding the pocket judge that ``make setup`` builds (``pocket_judge``).

The bottom layer, beside ``errors``: imports nothing else of prom_reward.
"""
