"""The pocket judge: SmolLM2-135M-Instruct plus a packaged low-rank update trained on the Prometheus format.

The update (``assets/pocket_judge/adapter.safetensors``) is made by ``train_judge.ship`` from a trained
expert (see ``train_judge/README.md``; none ships yet: the pocket experts trained so far do not write a
parseable verdict often enough). ``ensure_pocket_judge()`` adds it to the converted SmolLM2 weights
(``W += B @ A``) and saves a plain Hugging Face folder ``<cache>/pocket-judge`` that vLLM loads.
Idempotent: a marker records the adapter's hash, and the folder is renamed into place only once
complete.

Shell::

    python -m prom_reward.pocket_judge          # prints the merged folder

Example:
    >>> pocket_adapter_dir().name
    'pocket_judge'
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .models import MARKER, _make_readable, cache_dir, ensure_smollm2

POCKET_NAME = "pocket-judge"
_FORMAT = 1


def pocket_adapter_dir() -> Path:
    """The packaged adapter folder (``adapter.safetensors`` + ``adapter.json``; none ships yet)."""
    return Path(str(resources.files("prom_reward").joinpath("assets").joinpath("pocket_judge")))


def _adapter_hash(folder: Path) -> str:
    return hashlib.sha256((folder / "adapter.safetensors").read_bytes()).hexdigest()[:16]


def _complete(target: Path, digest: str) -> bool:
    try:
        m = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return m.get("format") == _FORMAT and m.get("adapter") == digest and (target / "model.safetensors").is_file()


def apply_update(base: Path, adapter: Path) -> tuple[dict[str, Any], list[str]]:
    """The base model's weights (``model.safetensors``) with the low-rank update of ``adapter``
    (``W += B @ A`` per module, in float32, stored back in the weight's dtype); also the module names."""
    from safetensors.torch import load_file

    weights = load_file(str(Path(base) / "model.safetensors"))
    update = load_file(str(Path(adapter) / "adapter.safetensors"))
    names = sorted({k.rsplit(".", 1)[0] for k in update})
    for name in names:
        if name not in weights:
            raise ConfigError(f"the pocket adapter updates {name!r}, which {base} lacks; rebuild SmolLM2 "
                              "with `python -m prom_reward.models smollm2`")
        w = weights[name]
        delta = update[name + ".lora_B"].float() @ update[name + ".lora_A"].float()
        weights[name] = (w.float() + delta).to(w.dtype).contiguous()
    return weights, names


def build_judge_folder(base: Path, adapter: Path, out: Path) -> Path:
    """Write a plain Hugging Face folder: ``base`` plus ``adapter``'s update (tokenizer files copied).

    Used to evaluate a shipped adapter exactly as ``make setup`` will apply it.
    """
    from safetensors.torch import save_file

    weights, _ = apply_update(Path(base), Path(adapter))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in Path(base).iterdir():
        if f.is_file() and f.name not in ("model.safetensors", MARKER):
            shutil.copy2(f, out / f.name)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def ensure_pocket_judge(cache: Path | None = None) -> Path:
    """Return ``<cache>/pocket-judge``, building it from SmolLM2 and the shipped adapter if needed."""
    adapter = pocket_adapter_dir()
    if not (adapter / "adapter.safetensors").is_file():
        raise ConfigError(f"the pocket judge adapter is missing from {adapter}; reinstall prom-reward or rebuild "
                          "it with `python -m train_judge.ship` (see train_judge/README.md)")
    root = Path(cache) if cache is not None else cache_dir()
    target = root / POCKET_NAME
    digest = _adapter_hash(adapter)
    if _complete(target, digest):
        return target
    from safetensors.torch import save_file

    base = ensure_smollm2(root)
    weights, names = apply_update(base, adapter)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{POCKET_NAME}.tmp-", dir=root))
    try:
        for f in base.iterdir():
            if f.is_file() and f.name not in ("model.safetensors", MARKER):
                shutil.copy2(f, tmp / f.name)
        save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / MARKER).write_text(json.dumps({"format": _FORMAT, "adapter": digest, "modules": len(names)}),
                                  encoding="utf-8")
        _make_readable(tmp)  # mkdtemp makes it private; the cache may be shared
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def main() -> None:
    try:
        print(ensure_pocket_judge())
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
