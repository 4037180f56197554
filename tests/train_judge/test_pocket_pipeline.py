"""The pocket pipeline end to end on the tiny random Llama (real TRL SFT, real merges, the real
``transformers`` backend judging the pocket dev split and Auto-J pairs, the shipped judge rebuilt
and judged again), plus the choice rule and the ready GPU configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from prom_reward.errors import ConfigError
from train_judge.config import load_config
from train_judge.pocket_pipeline import CANDIDATES, CONFIGS, main, pick_judge, ship_judge
from train_judge.sft import RUN_FILE


def _tiny_config(path: Path, task: str) -> Path:
    cfg = {
        "model": "set-by-pipeline",
        "task": task,
        "dataset": "pocket",
        "output_dir": "unused",
        "max_length": 2048,
        "max_examples": 4,
        "prefer_short": True,
        "learning_rate": 1e-3,
        "per_device_train_batch_size": 2,
        "gradient_checkpointing": False,
        "max_steps": 2,
        "save_steps": 2,
        "logging_steps": 1,
        "torch_threads": 1,
        "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"]},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.integration  # a real vLLM engine
def test_pipeline_trains_merges_evaluates_and_ships(
    tiny_model_dir: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pocket"
    args = [
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--absolute-config",
        str(_tiny_config(tmp_path / "abs.yaml", "absolute")),
        "--relative-config",
        str(_tiny_config(tmp_path / "rel.yaml", "relative")),
        "--vicuna",
        str(data_dir / "vicuna_eval.json"),
        "--autoj",
        str(data_dir / "autoj_pairwise.jsonl"),
        "--dev-limit",
        "4",
        "--pairs",
        "2",
        "--max-tokens",
        "8",
        "--num-samples",
        "2",
        "--backend",
        "transformers",
        "--device",
        "cpu",
        "--batch-size",
        "4",
        "--ship",
        "merged-linear",
    ]
    main(args)
    printed = capsys.readouterr().out
    for name in ("absolute", "relative"):
        run = json.loads((out / name / RUN_FILE).read_text())
        assert run["global_step"] == 2 and run["data"]["examples"] == 4
    for method in ("linear", "dare_linear"):
        assert (out / f"merged-{method}" / "model.safetensors").is_file()
    for name in ("base", *CANDIDATES, "shipped"):
        res = json.loads((out / f"eval_{name}.json").read_text())
        assert res["name"] == name and res["backend"] == "transformers" and res["num_samples"] == 2
        assert res["n_dev"] == 4 and len(res["absolute"]["scores"]) == 4
        assert res["n_pairs"] == 2 and len(res["pairwise"]["predictions"]) == 2
    # a merge ships as the two expert adapters plus merge.yaml, rebuilt exactly as `make setup` does
    meta = json.loads((out / "shipped" / "judge.json").read_text())
    assert meta["judge"] == "merged-linear" and meta["form"] == "merge" and meta["method"] == "linear"
    assert yaml.safe_load((out / "shipped" / "merge.yaml").read_text())["models"][0] == {
        "path": "absolute",
        "weight": 0.5,
    }
    from safetensors.torch import load_file

    for e in ("absolute", "relative"):
        shipped = load_file(str(out / "shipped" / e / "adapter_model.safetensors"))
        trained = load_file(str(out / e / "adapter_model.safetensors"))
        assert set(shipped) == set(trained) and all(v.dtype == torch.bfloat16 for v in shipped.values())
    rebuilt = load_file(str(out / "shipped-model" / "model.safetensors"))
    evaluated = load_file(str(out / "merged-linear" / "model.safetensors"))
    q = "model.layers.0.self_attn.q_proj.weight"
    assert torch.allclose(rebuilt[q].float(), evaluated[q].float(), atol=1e-3)  # bf16 adapters vs fp32
    # an expert ships in the same form: its adapter and a one-model linear merge, rebuilt to the expert
    one = ship_judge(out, "absolute", tmp_path / "ship-abs")
    assert one["judge"] == "absolute" and one["method"] == "linear"
    assert one["models"] == [{"path": "absolute", "weight": 1.0}]
    assert sorted(p.name for p in (tmp_path / "ship-abs").iterdir()) == ["absolute", "judge.json", "merge.yaml"]
    from train_judge.pocket_judge import merge_experts_onto

    merge_experts_onto(tiny_model_dir, tmp_path / "ship-abs", tmp_path / "abs-model")
    expert = load_file(str(out / "absolute" / "adapter_model.safetensors"))
    a = next(v for k, v in expert.items() if "layers.0.self_attn.q_proj.lora_A" in k)
    b = next(v for k, v in expert.items() if "layers.0.self_attn.q_proj.lora_B" in k)
    base_q = load_file(str(tiny_model_dir / "model.safetensors"))[q].float()
    scaling = 8 / 4  # lora alpha / r of _tiny_config
    want = base_q + scaling * (b.bfloat16().float() @ a.bfloat16().float())
    got = load_file(str(tmp_path / "abs-model" / "model.safetensors"))[q].float()
    assert torch.allclose(got, want.bfloat16().float(), atol=1e-2)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chosen"] == "merged-linear" and "| shipped |" in summary["table"]
    assert "| merged-dare_linear |" in printed and "shipped: merged-linear" in printed
    # resumable: a second run finds every stage done and recomputes nothing
    watched = [*out.glob("eval_*.json"), out / "absolute" / RUN_FILE, out / "merged-linear" / "model.safetensors"]
    stamps = {p: p.stat().st_mtime_ns for p in watched}
    main(args)
    assert {p: p.stat().st_mtime_ns for p in watched} == stamps


def _r(pearson: float, abs_fail: float, acc: float, pair_fail: float) -> dict:
    return {
        "absolute": {"pearson": pearson, "parse_failure_rate": abs_fail},
        "pairwise": {"acc_wo_tie": acc, "parse_failure_rate": pair_fail},
    }


@pytest.mark.parametrize(
    "results,limit,expected",
    [
        ({"a": _r(0.1, 0.0, 0.5, 0.1), "b": _r(0.3, 0.2, 0.4, 0.2)}, 0.25, "b"),  # best sum
        ({"a": _r(0.1, 0.0, 0.5, 0.1), "b": _r(0.3, 0.3, 0.6, 0.0)}, 0.25, "a"),  # b fails absolute
        ({"a": _r(0.9, 0.0, 0.0, 0.99), "b": _r(0.2, 0.1, 0.3, 0.2)}, 0.25, "b"),  # a cannot rank pairs
        ({"a": _r(float("nan"), 0.0, 0.5, 0.0), "b": _r(-0.2, 0.1, 0.5, 0.1)}, 0.25, "b"),  # NaN never wins
    ],
)
def test_pick_judge(results: dict, limit: float, expected: str) -> None:
    assert pick_judge(results, limit) == expected


def test_pick_judge_names_the_rates_when_none_qualifies() -> None:
    with pytest.raises(ConfigError, match=r"parse-failure rates .*'a': \(0.9, 0.1\)"):
        pick_judge({"a": _r(0.5, 0.9, 0.5, 0.1), "b": {}}, 0.25)


@pytest.mark.parametrize(
    "name,task", [("pocket_absolute_gpu.yaml", "absolute"), ("pocket_relative_gpu.yaml", "relative")]
)
def test_gpu_configs_are_the_full_recipe(name: str, task: str) -> None:
    cfg = load_config(CONFIGS / name)
    assert cfg.task == task and cfg.max_examples is None and cfg.bf16 and cfg.lora is not None
    assert cfg.model == "local:smollm2" and cfg.wire == "chat"
