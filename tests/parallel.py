"""The suite in pytest-xdist workers (``make test``, whose ``PYTEST_WORKERS`` is ``-n 2 --dist loadgroup``): the
tests that share a costly fixture run on one worker, so no engine, server, Ray cluster or module-wide stand-in
starts twice.

Each worker computes the groups at collection (``group_shared_fixtures``, called by ``tests/conftest.py``)
and writes them to the run's base temp folder; the controller's scheduler (``pytest_xdist_make_scheduler``,
imported into ``tests/conftest.py``) hands out the engine groups first (``engines:*``, one per worker: where CI
runs they are the suite's longest), then one group at a time, largest first, and every other test on its own.
pytest-xdist 3.8's own ``xdist_group`` mark does not work with pytest 9: it renames the node id, which pytest 9
computes from its parts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection

import pytest

ENGINE_GROUP = "engines:"
"""The prefix of an engine group's name (``tests/conftest.py`` ``ENGINE_GROUPS``): scheduled before any other group."""
GROUPS_FILE = "xdist_groups.json"
"""Written by each worker into the run's base temp folder: test id -> group, read by the scheduler."""


def group_shared_fixtures(
    config: pytest.Config, items: list[pytest.Item], engines_of: Callable[[pytest.Item], Collection[str]]
) -> dict[str, str]:
    """Under ``--dist loadgroup`` the tests that share a fixture wider than one test run on one worker, so
    nothing costly starts twice: the tests of each model's session engine and server form one group
    (``engines_of``: a test's engine groups, e.g. ``engines:tiny``; two workers then run the two models' engine
    tests side by side); a test using a module-, class- or package-scoped fixture joins its module's group, one
    using a session fixture of a sub-folder's conftest that folder's; groups sharing a test merge (named by the
    first engine group in them). The groups go to ``GROUPS_FILE`` for ``pytest_xdist_make_scheduler``
    (pytest-xdist 3.8 puts its ``xdist_group`` mark into the node id, which pytest 9 no longer lets it change),
    and are returned: test id -> group."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    def group(item: pytest.Item, fixture: pytest.FixtureDef) -> str | None:
        if fixture.scope != "session":
            return item.nodeid.split("::")[0]
        return fixture.baseid if fixture.baseid not in ("", "tests") else None  # the root's: once per worker

    keys: dict[str, list[str]] = {}
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        found = {group(item, d[-1]) for d in defs.values() if d and d[-1].scope != "function"}
        found.update(engines_of(item))  # a session engine or server, by name or by getfixturevalue
        keys[item.nodeid] = sorted(k for k in found if k)
        for key in keys[item.nodeid][1:]:
            parent[root(key)] = root(keys[item.nodeid][0])
    names: dict[str, str] = {}  # a merged group is named by its first engine group
    for key in sorted({k for item in items for k in engines_of(item)}):
        names.setdefault(root(key), key)
    groups = {i: names.get(root(k[0]), root(k[0])) for i, k in keys.items() if k}
    path = config._tmp_path_factory.getbasetemp().parent / GROUPS_FILE  # type: ignore[attr-defined]
    part = path.with_suffix(f".{os.getpid()}")
    part.write_text(json.dumps(groups))
    os.replace(part, path)  # both workers write the same map: whole, never half
    return groups


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup``: pytest-xdist's scheduler by scope, each test's scope its group from
    ``GROUPS_FILE`` (a test in no group is a scope of its own); workers take the engine groups first, then the
    others largest first. By test count alone (pytest-xdist's order) the crossing matrix's 1,171 stand-in cells went
    first and the SmolLM2 engine group waited behind another group, on the worker whose time is the suite's."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    path = config._tmp_path_factory.getbasetemp() / GROUPS_FILE  # type: ignore[attr-defined]
    groups: dict[str, str] = {}

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not groups and path.exists():  # written before the workers report their collections
                groups.update(json.loads(path.read_text()))
            return groups.get(nodeid, nodeid)

        def _assign_work_unit(self, node: object) -> None:
            engines = [scope for scope in self.workqueue if scope.startswith(ENGINE_GROUP)]
            if engines:
                self.workqueue.move_to_end(engines[0], last=False)
            super()._assign_work_unit(node)  # type: ignore[arg-type]

    return SharedFixtureScheduling(config, log)
