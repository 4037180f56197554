"""Every entry point of the crossing matrix has a real-engine cell (``engine_cells.ENGINE_CELLS``): an existing
test that exists, runs in ``make test`` (not ``slow``) and uses a vLLM engine or server fixture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ENGINE_FIXTURES
from tests.crossings.engine_cells import ENGINE_CELLS
from tests.crossings.entry_points import ENTRY_POINTS

REPO = Path(__file__).resolve().parents[2]


def test_every_entry_point_has_an_engine_cell():
    missing = sorted(set(ENTRY_POINTS) - set(ENGINE_CELLS))
    assert not missing, f"add the engine test of {missing} to tests/crossings/engine_cells.py ENGINE_CELLS"
    assert not set(ENGINE_CELLS) - set(ENTRY_POINTS), "ENGINE_CELLS names entry points the matrix does not have"


def _marks(decorators: list[ast.expr]) -> set[str]:
    return {n.attr for d in decorators for n in ast.walk(d) if isinstance(n, ast.Attribute)}


@pytest.mark.parametrize("node", sorted(set(ENGINE_CELLS.values())))
def test_the_engine_cell_exists_uses_an_engine_and_runs_in_make_test(node):
    path, name = node.split("::")
    tree = ast.parse((REPO / path).read_text())
    found = [f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name == name]
    assert found, f"{node}: no such test"
    test = found[0]
    engines = {a.arg for a in test.args.args} & set(ENGINE_FIXTURES)
    assert engines, f"{node}: uses no engine or server fixture ({', '.join(ENGINE_FIXTURES)})"
    module_marks = {
        m for s in tree.body if isinstance(s, ast.Assign) for t in s.targets
        if isinstance(t, ast.Name) and t.id == "pytestmark" for m in _marks([s.value])
    }  # fmt: skip
    assert "slow" not in _marks(test.decorator_list) | module_marks, f"{node} is slow: make test leaves it out"
