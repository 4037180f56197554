"""The judging core: ``PrometheusJudge`` (``judge``) and what it is made of: validated items (``items``), the
sampling loop (``sampler``), results (``results``), combining samples and orders (``combine``,
``verdict_probs``), fitting prompts to the context (``context``), presets (``presets``) and the ``Judge``
protocol (``protocol``). Imports ``format``, ``backends`` and ``confidence`` only.
"""
