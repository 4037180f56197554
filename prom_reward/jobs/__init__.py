"""The one job engine behind ``prom-reward grade``, ``compare`` and ``pairs``, in one process (``local``) or on Ray
Data (``ray_run``): read and check rows (``source``, ``scan``), plan batches (``plan``), judge them with the kind's
row code (``spec``, ``batch``), commit part files (``parts``, ``manifest``), merge, summarise (``summary``).
Entry points are in ``run``. Imports ``core``, ``preferences`` and below; never rewards, integrations or the CLI.
"""
