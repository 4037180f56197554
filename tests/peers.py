"""The peer frameworks the suite tests against must import: a missing one fails the run at collection instead of
silently skipping its tests (``pytest.importorskip`` did). The pinned peers are read from
``requirements/frameworks.txt`` (``name==version`` lines, installed ``--no-deps``), with the modules the tests import
from them; Ray and datasets come from ``requirements/cpu.txt``."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

FRAMEWORKS = Path(__file__).resolve().parents[1] / "requirements" / "frameworks.txt"
MODULES = {"openrlhf": ("openrlhf.utils.agent",), "verifiers": ("verifiers.v1",)}
"""The modules the tests import from a peer, where more than its top-level package."""
ALSO = ("ray", "ray.data", "datasets")
LOCATED = ("rewardbench",)
"""Peers the tests read by path, never import (``tests/format/conftest.py``): found, not imported."""


def pinned(path: Path = FRAMEWORKS) -> list[str]:
    """The distributions pinned ``name==version`` in ``path``."""
    return [m[1] for line in path.read_text().splitlines() if (m := re.match(r"^([A-Za-z0-9_.-]+)==", line.strip()))]


def peer_modules(path: Path = FRAMEWORKS) -> list[str]:
    """Every module the suite needs from its peers."""
    names = [mod for dist in pinned(path) for mod in MODULES.get(dist, (dist.replace("-", "_"),))]
    return [*names, *ALSO]


def missing_peers(modules: list[str]) -> list[str]:
    """``module: error`` for each of ``modules`` that does not import."""
    out = []
    for name in modules:
        try:
            if name in LOCATED:
                if importlib.util.find_spec(name) is None:
                    raise ModuleNotFoundError(f"No module named {name!r}")
                continue
            importlib.import_module(name)
        except Exception as e:  # an ImportError, or a peer broken by a missing --no-deps dependency
            out.append(f"{name}: {type(e).__name__}: {e}")
    return out


def check_peers(modules: list[str] | None = None) -> None:
    """Raise ``RuntimeError`` naming every peer module that does not import, and the fix."""
    bad = missing_peers(peer_modules() if modules is None else modules)
    if bad:
        raise RuntimeError(
            "peer frameworks the tests run against do not import (their tests would not run): "
            + "; ".join(bad)
            + "; fix: make setup (requirements/frameworks.txt, cpu.txt), or add the missing --no-deps dependency"
        )
