"""prom_reward.local.cpu_defaults: the KV-cache default for vLLM's CPU build, and who applies it."""

import os

from prom_reward.local.cpu_defaults import apply_cpu_defaults, default_kvcache_gib


def test_default_is_bounded_and_user_value_wins(monkeypatch):
    import prom_reward.local.cpu_defaults as cd

    for total, want in ((2.0, 1), (24.0, 3), (512.0, 4)):
        monkeypatch.setattr(cd, "_total_memory_gib", lambda t=total: t)
        assert default_kvcache_gib() == want
    env = {"VLLM_CPU_KVCACHE_SPACE": "7"}
    assert apply_cpu_defaults(env) == {} and env["VLLM_CPU_KVCACHE_SPACE"] == "7"
    env = {"VLLM_CPU_KVCACHE_SPACE": ""}  # empty counts as unset
    assert apply_cpu_defaults(env) == {"VLLM_CPU_KVCACHE_SPACE": env["VLLM_CPU_KVCACHE_SPACE"]}


def test_engine_applies_the_default_before_vllm_starts(monkeypatch):
    """VLLMEngine on a CPU build sets the KV-cache size before vllm.LLM reads it (user code, any entry point)."""
    import vllm

    import prom_reward.backends.vllm_engine as ve
    from prom_reward.backends.vllm_options import NO_ENGINE_ENV

    monkeypatch.delenv(NO_ENGINE_ENV, raising=False)  # the engine below is a recorder: allowed in the unit tier
    monkeypatch.setattr(ve, "check_engine_allowed", lambda what: None)  # and not an engine start to count
    seen = {}

    class RecordingLLM:  # stands in for vllm.LLM: records the environment the engine would start with
        def __init__(self, **kwargs):
            seen["kv"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE")

        def get_tokenizer(self):
            return None

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.setattr(vllm, "LLM", RecordingLLM)
    monkeypatch.setattr(ve, "_is_cpu_platform", lambda: True)
    ve.VLLMEngine("some-model", wire="raw")
    assert seen["kv"] == str(default_kvcache_gib())
