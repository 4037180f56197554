"""The ``prom-reward`` command (``main``: the parser and the one-line ``prom-reward: error: ...; fix: ...``
handling, exit status 2): the jobs (``jobs``), judge servers and the OpenRLHF reward server
(``servers``), the judgment store (``store``), the probe and the report (``probe``, ``report``), and the
judge options they share (``judge_options``). ``python -m prom_reward.cli`` runs it too. ``demo`` is
``make demo``: the sample rollouts graded by the pocket judge.
"""
