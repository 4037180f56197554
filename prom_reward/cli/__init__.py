"""The ``prom-reward`` command (``main``: the parser and the one-line ``prom-reward: error: ...; fix: ...``
handling, exit status 2): jobs, servers, the judgment store, the probe and the report, and the judge options
they share. ``python -m prom_reward.cli`` runs it too; ``demo`` is ``make demo``.
"""
