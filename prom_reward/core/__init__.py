"""The judging core: ``PrometheusJudge`` (``judge``) and the pieces it is made of: validated items
(``items``, the one item model), the sampling loop with retries and forced verdicts (``sampler``),
results (``results``: ``Grade``, ``Verdict``, ``JudgeStats``), combining samples and orders (``combine``,
``verdict_probs``), fitting prompts to the context (``context``), presets (``presets``), the ``Judge``
protocol (``protocol``, with the list forms written once over the item methods). The cascade and SE-Cali are in
``prom_reward.experimental``.

Imports ``format``, ``backends`` and ``confidence``; never rewards, jobs, integrations or the CLI.
"""
