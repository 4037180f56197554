"""The one job engine behind ``prom-reward grade``, ``compare`` and ``pairs``, in one process or on Ray Data (both in
``batch``); entry points in ``run``. Imports ``core``, ``preferences``, ``rewards``' outage policy and start-up check,
and below; never integrations or the CLI."""
