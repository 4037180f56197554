"""The doctest harness every package's ``test_doctests.py`` uses: one test case per module that carries a
runnable example (an example not marked ``+SKIP`` in a docstring doctest reads: the module's, its classes',
its functions' and methods'), found by reading the source without importing it; the case fails unless the
examples run (``attempted > 0``) and all pass. A module without one (or whose examples all need a server,
a GPU ...: ``+SKIP``) gets no test case, so no case passes without running anything.
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _docstrings(tree: ast.Module) -> list[str]:
    """The docstrings doctest collects: the module's, and those of its top-level classes and functions and of
    the classes' methods (also when defined under a top-level ``if``/``try``)."""
    found = [ast.get_docstring(tree, clean=False) or ""]

    def visit(body: list[ast.stmt], depth: int) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(ast.get_docstring(node, clean=False) or "")
                if isinstance(node, ast.ClassDef) and depth == 0:
                    visit(node.body, 1)
            elif isinstance(node, (ast.If, ast.Try)) and depth == 0:
                visit(node.body, 0)
                visit(node.orelse, 0)

    visit(tree.body, 0)
    return found


def has_example(path: Path) -> bool:
    """True when the module at ``path`` has a docstring example that doctest would run (not ``+SKIP``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parser = doctest.DocTestParser()
    return any(
        not example.options.get(doctest.SKIP, False)
        for doc in _docstrings(tree)
        for example in parser.get_examples(doc, str(path))
    )


def modules_with_examples(package: str, *, exclude: tuple[str, ...] = ()) -> list[str]:
    """Dotted names of the modules of ``package`` (subpackages included, those in ``exclude`` and below left
    out) that carry a runnable example.

    >>> "tests.doctests" in modules_with_examples("tests")
    True
    """
    base = ROOT.joinpath(*package.split("."))
    names = []
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if any(name == e or name.startswith(e + ".") for e in exclude) or not has_example(path):
            continue
        names.append(name)
    return names


def run_examples(name: str) -> None:
    """Import module ``name`` and run its docstring examples: at least one must run, none may fail."""
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.attempted > 0, f"{name}: a docstring has an example, but doctest found none to run"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
