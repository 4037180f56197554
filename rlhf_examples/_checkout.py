"""Lets an example run as a file (``python rlhf_examples/grpo_prometheus.py``, the way TRL's examples are run)
as well as a module (``python -m rlhf_examples.grpo_prometheus``).

Run as a file, Python puts the file's folder (``rlhf_examples/``) first on ``sys.path``, not the repository
root, so ``rlhf_examples`` (the examples' shared ``common``) cannot be imported, and ``prom_reward`` would come
from wherever it is installed rather than this checkout. Nothing of the repository runs before an example's
own first lines, so each example imports this module first when it has no package (``__package__`` empty: run
as a file; a spawned worker re-running the file inherits this ``sys.path``); the one thing done, here, is
putting the checkout's root first on ``sys.path``, as ``python -m`` from the root does.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
"""The repository root: the folder holding ``rlhf_examples/`` and ``prom_reward/``."""

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
