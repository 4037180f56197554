"""The test tiers: which tests count as ``integration`` (left out of ``make test-fast``), and the guard that
makes an engine or server start fail in the unit tier instead of slowing it."""

from __future__ import annotations

import pytest

from prom_reward.backends.servers import JudgeServers, ServeConfig
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.backends.vllm_options import NO_ENGINE_ENV, check_engine_allowed
from prom_reward.errors import ConfigError
from tests.conftest import ENGINE_FIXTURES, INTEGRATION_FIXTURES, OWN_ENGINES, is_integration


@pytest.mark.parametrize(
    "fixtures, marks, integration",
    [
        (("tmp_path",), (), False),
        (("tmp_path", "fake_server", "stand_in"), ("parametrize",), False),
        (("vllm_engine",), (), True),
        (("smollm2_engine",), (), True),
        (("vllm_server",), (), True),
        (("smollm2_server",), (), True),
        (("tiny_model_dir",), (), True),  # loads a model (transformers, TRL or vLLM)
        (("smollm2_dir", "tmp_path"), (), True),
        ((), ("smollm2",), True),
        ((), ("integration",), True),
        ((), ("slow",), False),  # slow is its own selection (make test-all)
    ],
)
def test_what_makes_a_test_integration(fixtures, marks, integration):
    assert is_integration(fixtures, marks) is integration


def test_this_session_marked_every_engine_test(request):
    """Every collected test that uses an engine, server or model fixture carries the mark ``-m`` reads."""
    for item in request.session.items:
        if any(f in INTEGRATION_FIXTURES for f in getattr(item, "fixturenames", ())):
            assert item.get_closest_marker("integration") is not None, item.nodeid


ENGINE_STARTS = 10
"""vLLM engine and server starts of ``make test`` (issue 44: 68 minutes of pytest at d68b6ab where CI runs on AVX2,
under 40 the aim): the session's four, shared by every test (``tests/conftest.py``), and the tests' own
(``OWN_ENGINES``). Raising it costs minutes of CI per start: share a session engine or server instead, or move a
second end-to-end run of a covered path to ``slow`` (benchmarks/results/2026-12-01_suite_speed.md)."""


def test_make_test_starts_the_counted_engines_and_no_more():
    assert len(ENGINE_FIXTURES) + sum(OWN_ENGINES.values()) == ENGINE_STARTS


@pytest.mark.parametrize("nodeid", sorted(OWN_ENGINES))
def test_each_test_with_engines_of_its_own_is_in_make_test(nodeid):
    """Every ``OWN_ENGINES`` entry names a test function of ``make test`` (not ``slow``, not gone): a moved or
    renamed test leaves no stale count behind."""
    import importlib

    path, name = nodeid.split("::")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    own = vars(vars(module)[name]).get("pytestmark", [])  # the function's marks: a list
    shared = vars(module).get("pytestmark", [])  # the module's: one mark or a list
    marks = {m.name for m in (*own, *(shared if isinstance(shared, list) else [shared]))}
    assert "integration" in marks and "slow" not in marks, (nodeid, marks)


@pytest.mark.parametrize(
    "start",
    [
        lambda tmp: VLLMEngine(str(tmp)),
        lambda tmp: JudgeServers(ServeConfig(model=str(tmp), log_dir=str(tmp))).start(),
        lambda tmp: check_engine_allowed("anything"),
    ],
    ids=["engine", "server", "check"],
)
def test_the_unit_tier_refuses_to_start_an_engine_or_server(monkeypatch, tmp_path, start):
    monkeypatch.setenv(NO_ENGINE_ENV, "1")
    with pytest.raises(ConfigError, match=rf"{NO_ENGINE_ENV}=1 .*mark the test `pytest.mark.integration`"):
        start(tmp_path)
    from tests import conftest

    conftest._REFUSED.clear()  # refused on purpose here: the autouse check must not fail this test


def test_without_the_variable_nothing_is_refused(monkeypatch):
    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)
    check_engine_allowed("an engine")
    monkeypatch.setenv(NO_ENGINE_ENV, "0")
    check_engine_allowed("an engine")


def test_a_start_of_a_tests_own_is_counted_and_the_sessions_is_not(monkeypatch):
    """What ``_engine_starts_are_counted`` (tests/conftest.py) reads: each start VLLMEngine or JudgeServers checks in,
    the session engines' left out."""
    from prom_reward.backends import servers, vllm_engine
    from tests import conftest

    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)
    before = len(conftest._STARTED)
    vllm_engine.check_engine_allowed("VLLMEngine('m')")  # what VLLMEngine calls before it starts
    servers.check_engine_allowed("a vLLM judge server for 'm'")
    with conftest.session_start():
        vllm_engine.check_engine_allowed("the session's engine")
    assert conftest._STARTED[before:] == ["VLLMEngine('m')", "a vLLM judge server for 'm'"]
    del conftest._STARTED[before:]  # counted on purpose here: the autouse check must not fail this test
