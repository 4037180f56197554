"""Judge presets and how they merge under user options for each backend."""

import pytest

from prom_reward import UnknownNameError
from prom_reward.core.presets import PRESETS, apply_preset, find_preset_for_model, get_preset


def test_prometheus_presets_use_the_training_wire():
    p = get_preset("prometheus-7b-v2.0")
    assert p.model == "prometheus-eval/prometheus-7b-v2.0" and p.wire == "chat"
    assert find_preset_for_model("prometheus-eval/prometheus-8x7b-v2.0").name == "prometheus-8x7b-v2.0"
    assert find_preset_for_model("/some/local/folder") is None


def test_unknown_preset_lists_names():
    with pytest.raises(UnknownNameError, match="prometheus-7b-v2.0"):
        get_preset("prometheus-13b")
    assert "smollm2-135m-instruct" in PRESETS.names()


def test_vllm_gets_engine_options_and_user_wins():
    model, opts = apply_preset(get_preset("prometheus-7b-v2.0"), "vllm", "prometheus-7b-v2.0", {"max_model_len": 4096})
    assert model == "prometheus-eval/prometheus-7b-v2.0"
    assert opts == {"wire": "chat", "dtype": "bfloat16", "max_model_len": 4096}


def test_server_gets_only_wire_and_served_model_name():
    model, opts = apply_preset(
        get_preset("prometheus-7b-v2.0"), "openai", "prometheus-7b-v2.0", {"base_url": "http://127.0.0.1:1/v1"}
    )
    assert model == "prometheus-eval/prometheus-7b-v2.0"
    assert opts == {"wire": "chat", "base_url": "http://127.0.0.1:1/v1"}
    _, inst = apply_preset(get_preset("prometheus-7b-v2.0-inst"), "openai", None, {})
    assert inst == {"wire": "inst", "endpoint": "completions"}


def test_server_judge_with_preset_builds(monkeypatch):
    from prom_reward import PrometheusJudge

    judge = PrometheusJudge("prometheus-7b-v2.0", backend="openai", base_url="http://127.0.0.1:9/v1")
    assert judge.backend.model == "prometheus-eval/prometheus-7b-v2.0" and judge.backend.wire.name == "chat"
