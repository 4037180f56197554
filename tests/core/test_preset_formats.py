"""A known judge's model id picks its judge format (``core.presets``); a format named by the user wins."""

from __future__ import annotations

import pytest

from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.presets import default_format, find_preset_for_model
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.jobs.run import judge_format_of

MODEL_FORMATS = [
    ("prometheus-eval/prometheus-7b-v2.0", "prometheus2"),
    ("Unbabel/M-Prometheus-7B", "m-prometheus"),
    ("flowaicom/Flow-Judge-v0.1", "flow-judge"),
    ("AtlaAI/Selene-1-Mini-Llama-3.1-8B", "selene"),
    ("NCSOFT/Llama-3-OffsetBias-8B", "offsetbias"),
    ("Skywork/Skywork-Critic-Llama-3.1-8B", "mt-bench-pairwise"),
    ("Skywork/Skywork-Critic-Llama-3.1-70B", "mt-bench-pairwise"),
    ("R-I-S-E/RISE-Judge-Qwen2.5-7B", "rise-judge"),
    ("R-I-S-E/RISE-Judge-Qwen2.5-32B", "rise-judge"),
    ("ZiyiYe/Con-J-Qwen2-7B", "con-j"),
    ("gaotang/RM-R1-Qwen2.5-Instruct-7B", "rm-r1"),
    ("gaotang/RM-R1-Qwen2.5-Instruct-14B", "rm-r1"),
    ("gaotang/RM-R1-Qwen2.5-Instruct-32B", "rm-r1"),
    ("gaotang/RM-R1-DeepSeek-Distilled-Qwen-7B", "rm-r1-reasoning"),
    ("gaotang/RM-R1-DeepSeek-Distilled-Qwen-14B", "rm-r1-reasoning"),
    ("gaotang/RM-R1-DeepSeek-Distilled-Qwen-32B", "rm-r1-reasoning"),
    ("someone/unknown-judge", "prometheus2"),
]


@pytest.mark.parametrize(("model", "fmt"), MODEL_FORMATS)
def test_a_known_model_id_picks_its_format(model, fmt):
    assert fmt in JUDGE_FORMATS
    assert default_format(model) == fmt
    assert judge_format_of({"backend": "scripted", "model": model}).name == fmt
    preset = find_preset_for_model(model)
    assert (preset.format if preset else "prometheus2") == fmt
    if preset is not None:  # the preset by its own name too, on the judge's chat template
        assert default_format(None, preset.name) == fmt and preset.wire == "chat"


@pytest.mark.parametrize(("model", "fmt"), [m for m in MODEL_FORMATS if m[1] != "prometheus2"])
def test_the_judge_takes_the_presets_format_and_an_explicit_format_wins(model, fmt):
    with PrometheusJudge(model=model, backend="scripted", outputs=["x"]) as judge:
        assert judge.format.name == fmt
    explicit = "prometheus2" if fmt != "prometheus2" else "m-prometheus"
    with PrometheusJudge(model=model, backend="scripted", outputs=["x"], format=explicit) as judge:
        assert judge.format.name == explicit
    assert judge_format_of({"backend": "scripted", "model": model, "format": explicit}).name == explicit
