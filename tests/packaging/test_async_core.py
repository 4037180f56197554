"""The sync API wraps the async one in exactly one place: ``prom_reward/backends/bridge.py`` is the only
module that starts or drives an event loop (one ``asyncio.run``, for the library's loop thread)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = "prom_reward/backends/bridge.py"


def occurrences(pattern: str) -> dict[str, int]:
    found = {}
    for path in sorted((ROOT / "prom_reward").rglob("*.py")):
        if n := len(re.findall(pattern, path.read_text())):
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
