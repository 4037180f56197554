"""The test tiers: which tests count as ``integration`` (left out of ``make test-fast``), and the guard that
makes an engine or server start fail in the unit tier instead of slowing it."""

from __future__ import annotations

import pytest

from prom_reward.backends.servers import JudgeServers, ServeConfig
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.backends.vllm_options import NO_ENGINE_ENV, check_engine_allowed
from prom_reward.errors import ConfigError
from tests.conftest import INTEGRATION_FIXTURES, is_integration


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
