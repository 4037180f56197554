"""The judging core: the ``Judge`` base (``protocol``), ``PrometheusJudge`` (``judge``) and what it is made of: items,
the sampling loop, results, combining samples and orders, the context check and presets. Imports ``format``,
``backends`` and ``confidence`` only."""
