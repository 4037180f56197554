"""The suite in pytest-xdist workers (``tests/parallel.py``): which tests share a worker, and a real
``pytest -n 2 --dist loadgroup`` run on a small generated suite that keeps each group on one worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.parallel import GROUPS_FILE, group_shared_fixtures, pytest_xdist_make_scheduler

REPO = Path(__file__).resolve().parents[2]


def _fixture(scope: str, baseid: str = "tests/jobs") -> SimpleNamespace:
    return SimpleNamespace(scope=scope, baseid=baseid)


def _item(nodeid: str, engine: tuple[str, ...] = (), **fixtures: SimpleNamespace) -> SimpleNamespace:
    defs = {name: [f] for name, f in fixtures.items()}
    return SimpleNamespace(nodeid=nodeid, engine=engine, _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))


FUNCTION, MODULE = _fixture("function"), _fixture("module")
ROOT_SESSION, PLUGIN_SESSION = _fixture("session", "tests"), _fixture("session", "")


@pytest.mark.parametrize(
    "items, groups",
    [
        pytest.param(  # per-test fixtures, and the session fixtures of tests/conftest.py or a plugin
            [_item("a.py::t", tmp_path=FUNCTION, smollm2_dir=ROOT_SESSION, tmp_path_factory=PLUGIN_SESSION)],
            {},
            id="no-shared-fixture",
        ),
        pytest.param(
            [_item("a.py::t1", server=MODULE), _item("a.py::t2", server=MODULE), _item("a.py::t3")],
            {"a.py::t1": "a.py", "a.py::t2": "a.py"},
            id="module-fixture",
        ),
        pytest.param([_item("a.py::T::t", state=_fixture("class"))], {"a.py::T::t": "a.py"}, id="class-fixture"),
        pytest.param(
            [
                _item("a.py::t", engine=("engines:a",), smollm2_dir=ROOT_SESSION),
                _item("b.py::t", engine=("engines:a",)),
            ],
            {"a.py::t": "engines:a", "b.py::t": "engines:a"},
            id="session-engines",
        ),
        pytest.param(  # two models' engines: two groups (two workers), merged by a test using both
            [_item("a.py::t", engine=("engines:a",)), _item("b.py::t", engine=("engines:b",))],
            {"a.py::t": "engines:a", "b.py::t": "engines:b"},
            id="two-models-two-groups",
        ),
        pytest.param(
            [
                _item("a.py::t", engine=("engines:a",)),
                _item("b.py::t", engine=("engines:b",)),
                _item("c.py::t", engine=("engines:a", "engines:b")),
            ],
            {"a.py::t": "engines:a", "b.py::t": "engines:a", "c.py::t": "engines:a"},
            id="a-test-of-both-models-merges-them",
        ),
        pytest.param(  # a.py's Ray cluster is used by an engine test: a.py's other tests go with it
            [
                _item("a.py::t1", ray=MODULE),
                _item("a.py::t2", engine=("engines:a",), ray=MODULE),
                _item("b.py::t", ray=MODULE),
            ],
            {"a.py::t1": "engines:a", "a.py::t2": "engines:a", "b.py::t": "b.py"},
            id="module-joins-engines",
        ),
        pytest.param(
            [
                _item("f/a.py::t", peer=_fixture("session", "tests/f")),
                _item("f/b.py::t", peer=_fixture("session", "tests/f")),
            ],
            {"f/a.py::t": "tests/f", "f/b.py::t": "tests/f"},
            id="sub-folder-session-fixture",
        ),
    ],
)
def test_tests_sharing_a_fixture_share_a_group(tmp_path, items, groups):
    config = SimpleNamespace(_tmp_path_factory=SimpleNamespace(getbasetemp=lambda: tmp_path / "gw0"))
    engines = lambda item: set(item.engine)  # noqa: E731  # type: ignore[attr-defined]
    assert group_shared_fixtures(config, items, engines) == groups  # type: ignore[arg-type]
    assert json.loads((tmp_path / GROUPS_FILE).read_text()) == groups


def test_the_engine_groups_go_first_one_per_worker(tmp_path):
    """Where CI runs the engine groups are the suite's longest: each worker starts one before any other group, however
    many tests the others hold (the crossing matrix: 1,171)."""
    (tmp_path / GROUPS_FILE).write_text(
        json.dumps({"m.py::a": "m.py", "m.py::b": "m.py", "t.py::a": "engines:tiny", "s.py::a": "engines:smollm2"})
    )
    options = {"dist": "loadgroup", "tx": ["2*popen"]}
    config = SimpleNamespace(
        getvalue=options.get,
        option=SimpleNamespace(loadscopereorder=True),
        _tmp_path_factory=SimpleNamespace(getbasetemp=lambda: tmp_path),
    )
    scheduler = pytest_xdist_make_scheduler(config, SimpleNamespace(loadscopesched=print))  # type: ignore[arg-type]
    collection = ["m.py::a", "m.py::b", "t.py::a", "s.py::a", "x.py::a"]
    sent: dict[str, list[str]] = {}

    class Node:
        shutting_down = False

        def __init__(self, name: str) -> None:
            self.gateway = SimpleNamespace(id=name)

        def send_runtest_some(self, indexes: list[int]) -> None:
            sent.setdefault(self.gateway.id, []).extend(collection[i] for i in indexes)

        def shutdown(self) -> None:
            pass

    for node in (Node("gw0"), Node("gw1")):
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    assert {sent["gw0"][0], sent["gw1"][0]} == {"t.py::a", "s.py::a"}, sent
    assert "m.py::a" in sent["gw0"][1:] + sent["gw1"][1:], sent  # then the largest other group


SUITE = {
    "conftest.py": """
        import os, pytest
        from tests.parallel import group_shared_fixtures, pytest_xdist_make_scheduler  # noqa: F401

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(config, items):
            if config.option.loadgroup:
                group_shared_fixtures(
                    config, items, lambda item: {"engines"} if "engine" in item.fixturenames else set()
                )

        @pytest.fixture(scope="session")
        def engine():
            return "engine"

        @pytest.fixture(autouse=True)
        def _where(request):
            with open(os.environ["WHERE"], "a") as f:
                f.write(request.node.nodeid + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """,
    "test_cluster.py": """
        import pytest, time

        @pytest.fixture(scope="module")
        def cluster():
            return "cluster"

        @pytest.mark.parametrize("i", range(6))
        def test_on_the_cluster(cluster, i):
            time.sleep(0.05)
    """,
    "test_engine.py": """
        import pytest, time

        @pytest.mark.parametrize("i", range(6))
        def test_on_the_engine(engine, i):
            time.sleep(0.05)
    """,
    "test_plain.py": """
        import pytest, time

        @pytest.mark.parametrize("i", range(12))
        def test_alone(i):
            time.sleep(0.05)
    """,
}


def test_two_workers_keep_each_group_on_one_worker(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    where = tmp_path / "where.txt"
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "xdist",
            "-n",
            "2",
            "--dist",
            "loadgroup",
        ],
        cwd=tmp_path,  # xdist alone: the other plugins' imports (hypothesis, hydra ...) took seconds per process
        env={**os.environ, "PYTHONPATH": path, "WHERE": str(where), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "24 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    ran = dict(line.split() for line in where.read_text().splitlines())
    workers = {
        module: {w for test, w in ran.items() if test.startswith(module)} for module in SUITE if module != "conftest.py"
    }
    assert len(ran) == 24 and len(workers["test_cluster.py"]) == len(workers["test_engine.py"]) == 1, ran


GROUPS_OF_THE_SUITE = """
import collections, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.option.loadgroup = True  # what pytest-xdist sets on a worker under --dist loadgroup

def pytest_collection_finish(session):
    import tests.conftest as c
    print("GROUPS", sorted(set(c._GROUPS.values())))
"""


@pytest.mark.parametrize("markers, merged", [("not slow", False), ("", True)])
def test_a_deselected_test_merges_no_engine_groups(tmp_path, markers, merged):
    """The suite's own grouping runs after ``-m`` deselects: the slow SE-Cali test using both models' engines merges
    their groups only when it runs, so ``make test`` (``not slow``) runs the two models' engine tests side by side."""
    (tmp_path / "groups_plugin.py").write_text(GROUPS_OF_THE_SUITE)
    path = os.pathsep.join(p for p in (str(tmp_path), str(REPO), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/experimental/test_calibration_engines.py", "--collect-only", "-q"]
        + ["tests/backends/test_teacher_forcing.py"]
        + ["-p", "groups_plugin", "-p", "no:cacheprovider", "-m", markers, "-s"],  # no other plugin: seconds each
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path, "PROM_REWARD_TEST_PRESTART": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("GROUPS")), "")
    groups = [g for g in line.split("'") if g.startswith("engines:")]
    assert len(groups) == (1 if merged else 2) and "engines:smollm2" in groups, done.stdout[-2000:]
