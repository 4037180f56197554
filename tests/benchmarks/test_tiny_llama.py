"""``benchmarks/tiny_llama.py``: the tiny random Llama the tests, benchmarks and examples run on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks import tiny_llama
from benchmarks.tiny_llama import build_tiny_llama
from prom_reward.errors import ConfigError
from prom_reward.local.models import MARKER


def _tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same_weights(a: Path, b: Path) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return ta.keys() == tb.keys() and all(ta[k].equal(tb[k]) for k in ta)


def test_tiny_llama_config_and_template(tiny_model_dir: Path):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cfg = AutoConfig.from_pretrained(tiny_model_dir)
    assert (cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers) == (64, 2, 2)
    assert cfg.head_dim == 32 and cfg.intermediate_size == 128 and cfg.max_position_embeddings == 8192
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert cfg.vocab_size == len(tok)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert sum(p.numel() for p in model.parameters()) < 5_000_000

    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Q"}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text == f"{tok.bos_token}[INST] Hi [/INST]Yo{tok.eos_token}[INST] Q [/INST]"
    with pytest.raises(Exception, match="system role"):
        tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], tokenize=False)


def test_tiny_llama_deterministic_and_idempotent(tiny_model_dir: Path, smollm2_dir: Path, tmp_path):
    again = build_tiny_llama(tmp_path / "a", tokenizer_from=smollm2_dir)
    assert _same_weights(again, tiny_model_dir)
    mtime = (again / "model.safetensors").stat().st_mtime_ns
    t0 = time.perf_counter()
    assert build_tiny_llama(again, tokenizer_from=smollm2_dir) == again
    assert time.perf_counter() - t0 < 0.5
    assert (again / "model.safetensors").stat().st_mtime_ns == mtime
    # other parameters rebuild in place
    build_tiny_llama(again, tokenizer_from=smollm2_dir, seed=1)
    assert not _same_weights(again, tiny_model_dir)


def test_tiny_llama_original_template_and_sizes(smollm2_dir: Path, tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    out = build_tiny_llama(
        tmp_path / "t", tokenizer_from=smollm2_dir, hidden_size=128, num_heads=2, num_layers=1, chat_template="original"
    )
    cfg = AutoConfig.from_pretrained(out)
    assert (cfg.hidden_size, cfg.head_dim, cfg.num_hidden_layers) == (128, 64, 1)
    tok = AutoTokenizer.from_pretrained(out)
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], tokenize=False
    )
    assert "<|im_start|>system\nS" in text


def test_tiny_llama_rejects_bad_params(smollm2_dir: Path, tmp_path):
    with pytest.raises(ConfigError, match="chat_template"):
        build_tiny_llama(tmp_path, tokenizer_from=smollm2_dir, chat_template="llama3")
    with pytest.raises(ConfigError, match="divisible"):
        build_tiny_llama(tmp_path, tokenizer_from=smollm2_dir, hidden_size=64, num_heads=3)


def test_cli_prints_its_folder(smollm2_dir: Path, tmp_path, capsys):
    tiny_llama.main([str(tmp_path / "cli"), "--tokenizer-from", str(smollm2_dir)])
    assert capsys.readouterr().out.strip() == str(tmp_path / "cli")
    assert (tmp_path / "cli" / MARKER).is_file()
