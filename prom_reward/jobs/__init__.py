"""The one job engine behind ``prom-reward grade``, ``compare`` and ``pairs``, in one process or on Ray Data.

A job reads rows (``source``, ``scan``: JSON lines, JSON, Parquet; local or fsspec paths), checks all of
them before anything is written, plans batches (``plan``), judges each batch with the job kind's row
code (``spec``; ``grade``, ``compare``, ``pairs``; ``batch``), commits each batch as one part file
(``parts``) bound to its input and options by a manifest (``manifest``), resumes from the committed
parts, merges them in input order, and reports one summary (``summary``). ``local`` runs it in process,
``ray_run`` on a pool of judge actors; ``run`` holds the entry points (``grade_file``, ``compare_file``,
``pairs_file``, ``*_dataset``) and ``preference_dataset`` the in-memory ``build_preference_dataset``.

Imports ``core``, ``preferences`` and below; never rewards, integrations or the CLI.
"""
