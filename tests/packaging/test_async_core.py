"""The sync API wraps the async one in exactly one place: ``prom_reward/backends/bridge.py`` is the only
module whose code starts or drives an event loop (one ``asyncio.run``, for the library's loop thread); the
docstrings' examples, run as a user's script would, may call ``asyncio.run``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = "prom_reward/backends/bridge.py"


def code(path: Path) -> str:
    """The module's source with its docstrings' lines blanked (their examples are a user's code, not the library's)."""
    lines = path.read_text().splitlines()
    for node in ast.walk(ast.parse("\n".join(lines))):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            if isinstance(body[0].value.value, str) and body[0].end_lineno is not None:
                lines[body[0].lineno - 1 : body[0].end_lineno] = [""] * (body[0].end_lineno - body[0].lineno + 1)
    return "\n".join(lines)


def test_a_docstring_example_is_not_code(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""Example:\n    >>> asyncio.run(main())\n"""\nimport asyncio\nasyncio.run(main())\n')
    assert re.findall(r"asyncio\.run\b", code(path)) == ["asyncio.run"]


def occurrences(pattern: str) -> dict[str, int]:
    found = {}
    for path in sorted((ROOT / "prom_reward").rglob("*.py")):
        if n := len(re.findall(pattern, code(path))):
            found[str(path.relative_to(ROOT))] = n
    return found


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"asyncio\.run\b", {BRIDGE: 1}),
        (r"run_coroutine_threadsafe", {BRIDGE: 2}),
        (r"run_until_complete|new_event_loop|get_event_loop\(", {}),
    ],
)
def test_only_the_bridge_drives_an_event_loop(pattern: str, expected: dict[str, int]):
    assert occurrences(pattern) == expected
