"""The shipped pocket judge: the packaged update applied to the real SmolLM2-135M-Instruct (as
``make setup`` does), its preset, and the real vLLM engine grading with it: the judge writes
``Feedback: ... [RESULT] k`` itself, with no forced verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from prom_reward.core.presets import get_preset, resolve_model_path
from prom_reward.local.models import ensure_pocket_judge
from train_judge.pocket_judge import merge_experts_onto, pocket_adapter_dir


@pytest.fixture(scope="module")
def pocket_dir(smollm2_dir: Path) -> Path:
    return ensure_pocket_judge()


def test_the_judge_ships_as_experts_plus_merge_config() -> None:
    folder = pocket_adapter_dir()
    spec = yaml.safe_load((folder / "merge.yaml").read_text())
    assert spec["method"] == "dare_linear" and spec["parameters"] == {"density": 0.7} and spec["seed"] == 0
    assert [m["path"] for m in spec["models"]] == ["absolute", "relative"]
    for e in ("absolute", "relative"):
        cfg = json.loads((folder / e / "adapter_config.json").read_text())
        assert cfg["r"] == 16 and cfg["lora_alpha"] == 32
        assert len(load_file(str(folder / e / "adapter_model.safetensors"))) == 2 * 7 * 30  # A, B x 7 x 30 layers
    meta = json.loads((folder / "judge.json").read_text())
    assert "pocket_absolute_gpu.yaml" in meta["experts"]["absolute"]


def test_setup_folder_is_the_merge(pocket_dir: Path, smollm2_dir: Path, tmp_path: Path) -> None:
    assert resolve_model_path("local:pocket-judge") == str(pocket_dir)
    marker = json.loads((pocket_dir / ".prom_reward_complete.json").read_text())
    assert marker["form"] == "merge" and marker["tensors"] == 272
    base = load_file(str(smollm2_dir / "model.safetensors"))
    tuned = load_file(str(pocket_dir / "model.safetensors"))
    q = "model.layers.0.self_attn.q_proj.weight"
    # stored in the dtype vLLM serves it in: no float32 -> bf16 cast (and warning) per tensor at load
    assert {t.dtype for t in tuned.values()} == {torch.bfloat16}
    assert json.loads((pocket_dir / "config.json").read_text())["dtype"] == "bfloat16"
    assert not torch.equal(tuned[q].to(base[q].dtype), base[q])
    assert torch.equal(tuned["model.embed_tokens.weight"].to(torch.bfloat16), base["model.embed_tokens.weight"])
    # DARE is seeded: merging again gives the same bytes (the evaluated judge is the shipped one)
    again = tmp_path / "again"
    assert merge_experts_onto(smollm2_dir, pocket_adapter_dir(), again) == 272
    assert (again / "model.safetensors").read_bytes() == (pocket_dir / "model.safetensors").read_bytes()


def test_preset_forces_only_cut_outputs() -> None:
    p = get_preset("pocket-judge")
    assert p.model == "local:pocket-judge" and p.wire == "chat"
    assert "force_verdict" not in p.judge and p.judge["sampling"]["max_tokens"] == 512  # the default: cut


@pytest.mark.slow  # the demo test (tests/cli/test_demo.py) runs the pocket judge end to end in CI
def test_pocket_judge_writes_the_format_itself(pocket_dir: Path, data_dir: Path) -> None:
    """Three dev-split responses (prompts the judge never trained on), graded on the real engine at
    the paper's sampling: each output parses to ``[RESULT] k`` without forcing."""
    from prom_reward import PrometheusJudge
    from train_judge.pocket import PocketData

    dev = PocketData(data_dir / "vicuna_eval.json").dev_items()[:3]
    judge = PrometheusJudge("pocket-judge", max_model_len=4096, enforce_eager=True, seed=0, truncate_response=True)
    try:
        grades = judge.grade(
            [d.instruction for d in dev],
            [d.response for d in dev],
            [d.rubric for d in dev],
            [d.reference_answer for d in dev],
        )
    finally:
        judge.close()
    assert judge.stats.forced == 0
    graded = [g for g in grades if g.score is not None]
    assert len(graded) >= 2, [g.samples[0].text[-200:] for g in grades]
    for g in graded:
        assert g.score in (1, 2, 3, 4, 5) and not g.forced
        assert len(g.feedback) > 40 and "[RESULT]" not in g.feedback
        assert any(f"[RESULT] {int(g.score)}" in s.text for s in g.samples)
