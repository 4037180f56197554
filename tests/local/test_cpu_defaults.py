"""prom_reward.local.models: the KV-cache default for vLLM's CPU build, and who applies it."""

import os

from prom_reward.local.models import apply_cpu_defaults, default_kvcache_gib


def test_default_is_bounded_and_user_value_wins(monkeypatch):
    import prom_reward.local.models as cd

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


def test_auto_dtype_is_float32_only_where_the_cpu_has_no_bfloat16_arithmetic(monkeypatch):
    """On an AVX2-only x86 CPU vLLM and torch emulate bfloat16 (2-3x slower than float32 there:
    benchmarks/results/2026-12-02_session5.md); ``auto`` then loads float32, in process and served alike."""
    import torch

    import prom_reward.local.models as cd
    from prom_reward.backends.servers import ServeConfig
    from prom_reward.backends.vllm_options import VLLMOptions

    monkeypatch.setattr(cd.platform, "machine", lambda: "x86_64")
    for bf16, amx, want in ((False, False, "float32"), (True, False, "auto"), (False, True, "auto")):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert cd.cpu_dtype("auto") == want and cd.cpu_dtype("bfloat16") == "bfloat16"
        assert VLLMOptions().for_cpu().llm_kwargs("m")["dtype"] == want
        assert VLLMOptions(dtype="float16").for_cpu().dtype == "float16"  # a dtype asked for is kept
        monkeypatch.setattr("prom_reward.local.models.vllm_is_cpu_build", lambda: True)
        cmd = ServeConfig(model="m").command("m", 0)
        assert cmd[cmd.index("--dtype") + 1] == want
        assert "auto" in ServeConfig(model="m", gpus=(0,)).command("m", 0)  # a GPU server: vLLM's own choice
    monkeypatch.setattr(cd.platform, "machine", lambda: "aarch64")  # not x86: vLLM's own kernels choose
    assert cd.cpu_dtype("auto") == "auto"
