"""Merge config validation (each listed problem, all at once), the YAML loader and the CLI (train_judge.merge)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from prom_reward.errors import ConfigError, PromRewardError
from tests.train_judge.merge.merge_util import BASE, M1, M2, load_output, save_model
from train_judge.merge import MergeConfig, ModelEntry, config_from_dict, load_config, run_merge

REPO = Path(__file__).resolve().parents[3]


def cfg(**kw):
    args = {
        "method": "ties",
        "base_model": "/b",
        "output": "/o",
        "parameters": {"density": 0.5},
        "models": (ModelEntry("/m1"), ModelEntry("/m2")),
    }
    args.update(kw)
    return MergeConfig(**args)


@pytest.mark.parametrize(
    "kw,message",
    [
        (
            {"method": "soup"},
            "unknown merge method 'soup'; valid names: dare_linear, dare_ties, linear, slerp, task_arithmetic, ties",
        ),
        ({"base_model": None}, "base_model: ties merges task vectors (model - base) and needs base_model"),
        ({"method": "task_arithmetic", "base_model": None, "parameters": {}}, "task_arithmetic merges task vectors"),
        ({"method": "dare_linear", "base_model": None}, "dare_linear merges task vectors"),
        ({"parameters": {}}, "models[0].density: missing; set parameters.density"),
        ({"parameters": {"density": 0}}, "models[0].density: expected a number in (0, 1]"),
        ({"parameters": {"density": 1.5}}, "models[1].density: expected a number in (0, 1]"),
        ({"parameters": {"density": "half"}}, "parameters.density: expected a number in (0, 1]"),
        (
            {"models": (ModelEntry("/m1", weight=-1.0), ModelEntry("/m2"))},
            "models[0].weight = -1.0: this method elects signs, so weights must be > 0",
        ),
        ({"parameters": {"density": 0.5, "weights": [1.0]}}, "parameters.weights: 1 weights for 2 models"),
        (
            {
                "parameters": {"density": 0.5, "weights": [1.0, 2.0]},
                "models": (ModelEntry("/m1", weight=1.0), ModelEntry("/m2")),
            },
            "use either parameters.weights or models[i].weight",
        ),
        (
            {"parameters": {"density": 0.5, "t": 0.3}},
            "parameters.t: not a parameter of ties; valid: density, lambda, normalize, weights",
        ),
        ({"parameters": {"density": 0.5, "lambda": "big"}}, "parameters.lambda: expected a number"),
        (
            {"method": "linear", "models": (ModelEntry("/m1", density=0.5),)},
            "models[0].density: linear does not use density; remove it",
        ),
        (
            {
                "method": "linear",
                "parameters": {},
                "models": (ModelEntry("/a", weight=1.0), ModelEntry("/b", weight=-1.0)),
            },
            "sum to 0, so normalize: true would divide by 0",
        ),
        ({"method": "slerp", "parameters": {}, "models": (ModelEntry("/a"),)}, "slerp takes exactly 2 models, got 1"),
        (
            {"method": "slerp", "parameters": {}, "models": (ModelEntry("/a"), ModelEntry("/b"), ModelEntry("/c"))},
            "slerp takes exactly 2 models, got 3",
        ),
        ({"method": "slerp", "parameters": {"t": 1.5}}, "parameters.t: expected a number in [0, 1]"),
        ({"method": "slerp", "parameters": {"t_by_name": {"*mlp*": -1}}}, "parameters.t_by_name['*mlp*']"),
        ({"method": "slerp", "parameters": {"weights": [1, 1]}}, "parameters.weights: slerp does not use weights"),
        ({"seed": "x"}, "seed: expected an int"),
        ({"max_shard_size": "lots"}, "max_shard_size: expected bytes or a size"),
        ({"dtype": "int8"}, "dtype: expected one of null, float32, float16, bfloat16"),
        ({"output": "/m1"}, "output: /m1 is also an input"),
        ({"output": "/", "base_model": "/b"}, "output: / holds the input /m1; write the merge to a folder outside it"),
        ({"models": (ModelEntry("/o/m1.safetensors"), ModelEntry("/m2"))}, "output: /o holds the input /o/m1"),
        ({"method": ["ties"]}, "method: expected a name, one of dare_linear, dare_ties, linear"),
        ({"base_model": 5}, "base_model: expected a model folder path, got 5"),
        ({"models": (ModelEntry(5), ModelEntry("/m2"))}, "models[0].path: expected a non-empty path, got 5"),  # type: ignore[arg-type]
    ],
)
def test_each_config_problem_is_reported(kw, message):
    with pytest.raises(ConfigError) as e:
        cfg(**kw)
    assert message in str(e.value)
    assert isinstance(e.value, PromRewardError)


def test_all_problems_reported_at_once():
    with pytest.raises(ConfigError) as e:
        cfg(base_model=None, parameters={"density": 2, "weights": [1, 2, 3]}, seed=None, dtype="fp8")
    text = str(e.value)
    assert text.startswith("invalid merge config (")
    for part in ("base_model:", "parameters.weights: 3 weights for 2 models", "seed:", "dtype:"):
        assert part in text


def test_header_checks_list_every_problem(tmp_path):
    base = save_model(tmp_path / "base", BASE)
    missing = save_model(tmp_path / "missing", {"w": M1["w"]})  # no "n"
    extra = save_model(tmp_path / "extra", M2, extra={"z.weight": torch.ones(2)})
    shaped = save_model(tmp_path / "shaped", {"w": [[1.0, 2.0, 3.0]], "n": [1.0, 1.0]})
    c = MergeConfig(
        method="task_arithmetic",
        base_model=str(base),
        output=str(tmp_path / "out"),
        models=tuple(ModelEntry(str(p)) for p in (missing, extra, shaped, tmp_path / "nowhere")),
    )
    with pytest.raises(ConfigError) as e:
        run_merge(c)
    text = str(e.value)
    assert "models[3]:" in text and "no such file or folder" in text
    assert "models[0]" in text and "1 tensors of base_model are missing: n" in text
    assert "models[1]" in text and "1 tensors not in base_model: z.weight" in text
    assert "models[2]" in text and "1 shape mismatches with base_model: w (1, 3) vs (2, 2)" in text
    assert not (tmp_path / "out").exists()  # nothing written


def test_models_of_another_architecture_or_vocabulary_are_refused(tmp_path):
    """Same tensor names and shapes, but config.json says another model_type / vocab_size: not merged."""
    import json

    base = save_model(tmp_path / "base", BASE)
    other = save_model(tmp_path / "other", M1)
    (other / "config.json").write_text(json.dumps({"model_type": "mistral", "vocab_size": 7}))
    (base / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 8}))
    same = save_model(tmp_path / "same", M2)
    (same / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 8, "torch_dtype": "bfloat16"}))
    c = MergeConfig(
        method="task_arithmetic",
        base_model=str(base),
        output=str(tmp_path / "out"),
        models=(ModelEntry(str(same)), ModelEntry(str(other))),
    )
    with pytest.raises(ConfigError) as e:
        run_merge(c)
    text = str(e.value)
    assert "invalid merge config (2 problems)" in text and "models[0]" not in text
    assert "models[1] (" in text and "config.json model_type is 'mistral', base_model's is 'llama'" in text
    assert "config.json vocab_size is 7, base_model's is 8" in text
    assert not (tmp_path / "out").exists()
    run_merge(dataclasses.replace(c, models=c.models[:1]))  # the same architecture merges


def test_not_a_model_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    c = MergeConfig(method="linear", models=(ModelEntry(str(tmp_path / "empty")),), output=str(tmp_path / "o"))
    with pytest.raises(ConfigError, match="expected a model folder with model.safetensors"):
        run_merge(c)


def test_yaml_loader_resolves_relative_paths(tmp_path):
    (tmp_path / "merge.yaml").write_text(
        yaml.safe_dump(
            {
                "method": "dare_linear",
                "base_model": "base",
                "models": ["m1", {"model": "m2", "weight": 0.5}],
                "parameters": {"density": 0.7},
                "output": "out",
                "seed": 3,
                "max_shard_size": "1MB",
            }
        )
    )
    c = load_config(tmp_path / "merge.yaml")
    assert c.base_model == str(tmp_path / "base") and c.output == str(tmp_path / "out")
    assert c.models[1] == ModelEntry(str(tmp_path / "m2"), weight=0.5) and c.seed == 3
    assert c.weights() == [1.0, 0.5] and c.densities() == [0.7, 0.7]


@pytest.mark.parametrize(
    "data,message",
    [
        ({"method": "linear", "models": ["a"]}, "output: missing"),
        ({"method": "linear", "models": ["a"], "output": "o", "modelz": []}, "modelz: unknown key"),
        ({"method": "linear", "models": [{"path": "a", "wieght": 1}], "output": "o"}, "unknown keys ['wieght']"),
        ({"method": "linear", "models": "a", "output": "o"}, "models: expected a list"),
        (["linear"], "expected a mapping"),
    ],
)
def test_yaml_shape_errors(data, message):
    with pytest.raises(ConfigError, match=None) as e:
        config_from_dict(data)
    assert message in str(e.value)


def test_yaml_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b'method: linear\nmodels: [a, b]\noutput: "\xff\xfe"\n')
    with pytest.raises(ConfigError, match=r"m.yaml: not UTF-8 text \(byte 0xff at offset \d+\); save it as UTF-8"):
        load_config(path)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "train_judge.merge", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.integration  # the merge CLI in a subprocess
def test_cli_end_to_end(tmp_path):
    save_model(tmp_path / "base", BASE, torch.bfloat16)
    save_model(tmp_path / "m1", M1, torch.bfloat16)
    save_model(tmp_path / "m2", M2, torch.bfloat16, shards=2)
    (tmp_path / "merge.yaml").write_text(
        "method: ties\nbase_model: base\nmodels:\n  - path: m1\n  - path: m2\nparameters: {density: 0.5}\n"
        "output: merged\n"
    )
    check = _cli(str(tmp_path / "merge.yaml"), "--check")
    assert check.returncode == 0 and check.stdout.startswith("ok: ties of 2 models -> 3 tensors")
    assert not (tmp_path / "merged").exists()
    run = _cli(str(tmp_path / "merge.yaml"))
    assert run.returncode == 0, run.stderr
    assert "merged 3 tensors" in run.stdout
    out = load_output(tmp_path / "merged")
    assert out["w"].dtype == torch.bfloat16 and out["w"].float().tolist() == [[5.0, 4.5], [-2.0, 1.0]]
    (tmp_path / "bad.yaml").write_text("method: ties\nmodels: [m1]\noutput: o2\n")
    bad = _cli(str(tmp_path / "bad.yaml"))
    assert bad.returncode == 2
    assert "base_model: ties merges task vectors" in bad.stderr and "models[0].density: missing" in bad.stderr


@pytest.mark.parametrize("method", ["linear", "dare_linear"])
def test_pocket_merge_configs_point_at_the_pocket_experts(method):
    """The shipped pocket merge configs merge the two experts the pocket SFT configs write."""
    from pathlib import Path

    import yaml

    from train_judge.merge.config import load_config

    repo = Path(__file__).resolve().parents[3]
    cfg = load_config(repo / "train_judge" / "configs" / f"pocket_merge_{method}.yaml")
    assert cfg.method == method
    experts = [
        yaml.safe_load((repo / "train_judge" / "configs" / f"pocket_{t}.yaml").read_text())["output_dir"]
        for t in ("absolute", "relative")
    ]
    assert [Path(m.path).resolve() for m in cfg.models] == [(repo / e).resolve() for e in experts]
    assert [m.weight for m in cfg.models] == [0.5, 0.5]


def test_prometheus2_merge_configs_follow_the_paper():
    """Linear alpha 0.5 for 7B; DARE with p = 0.1 (density 0.9, not 0.1) and lambda 1.95 for 8x7B."""
    configs = REPO / "train_judge" / "configs"
    lin = load_config(configs / "prometheus2_7b_merge_linear.yaml")
    assert lin.method == "linear" and lin.weights() == [0.5, 0.5] and lin.base_model is None
    dare = load_config(configs / "prometheus2_8x7b_merge_dare.yaml")
    assert dare.method == "dare_linear" and dare.method_params()["lambda"] == 1.95
    assert dare.densities() == [pytest.approx(0.9)] * 2
    assert [Path(m.path).name for m in dare.models] == ["prometheus2-8x7b-absolute", "prometheus2-8x7b-relative"]
