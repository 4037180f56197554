"""Fixtures of the judge-format tests: rewardbench 0.1.4's ``generative.py``, the reference code the
pairwise judges' prompts and parsers are checked against.

rewardbench is installed with ``--no-deps`` (requirements/frameworks.txt); its ``generative.py`` imports API
clients at module level (anthropic, google.generativeai, openai, fastchat, together) that its prompt and
parse functions never use. The fixture loads the file by path (not the ``rewardbench`` package, whose
``__init__`` needs torch-side extras) with those modules stubbed in ``sys.modules`` for that import only,
and puts back whatever ``sys.modules`` held before.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Every module generative.py imports at its top that is not the standard library.
STUBBED = (
    "anthropic",
    "google",
    "google.generativeai",
    "google.generativeai.types",
    "openai",
    "fastchat",
    "fastchat.conversation",
    "together",
)


class _Stub(types.ModuleType):
    """A module whose every attribute is a placeholder (a class, so ``except Stub.Error`` would work)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (Exception,), {})


def _generative_path() -> Path:
    spec = importlib.util.find_spec("rewardbench")  # finds the package without running its __init__
    assert spec is not None and spec.submodule_search_locations, "rewardbench 0.1.4 is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "generative.py"


def load_generative() -> types.ModuleType:
    """rewardbench's ``generative.py`` as a module, imported with its API clients stubbed."""
    saved = {name: sys.modules.get(name) for name in STUBBED}
    try:
        for name in STUBBED:
            sys.modules[name] = _Stub(name)
        spec = importlib.util.spec_from_file_location("_rewardbench_generative", _generative_path())
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


@pytest.fixture(scope="session")
def rewardbench_generative() -> Iterator[types.ModuleType]:
    """rewardbench 0.1.4's ``generative.py`` (``format_judge_answers``, ``process_judgement`` ...)."""
    yield load_generative()
