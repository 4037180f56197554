"""Building the pocket judge: SmolLM2-135M-Instruct fine-tuned on the Prometheus format, rebuilt from shipped parts.

``train_judge/assets/pocket_judge/`` holds ``merge.yaml`` plus the expert LoRA adapters it names (the
absolute and relative pocket experts and their DARE-linear merge, exactly as evaluated; a single expert
ships the same way, as a one-model ``linear`` merge): ``build_pocket_judge()`` runs that merge with
``train_judge.merge`` onto the converted SmolLM2 weights (see ``train_judge/README.md``).

The result is a plain Hugging Face folder ``<cache>/pocket-judge`` that vLLM loads
(``prom_reward.local.models.ensure_pocket_judge`` finds it there; ``make setup`` builds it). Idempotent: a marker
records the hash of the shipped files, and the folder is renamed into place only once complete.

Shell::

    python -m train_judge.pocket_judge          # prints the merged folder

Example:
    >>> pocket_adapter_dir().parent.parent.name
    'train_judge'
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from prom_reward.cli.voice import PlainHelpFormatter
from prom_reward.errors import ConfigError
from prom_reward.local.models import (
    MARKER,
    POCKET_FORMAT,
    POCKET_NAME,
    cache_dir,
    ensure_smollm2,
    is_complete,
    make_readable,
)
from train_judge.config import read_yaml
from train_judge.merge.config import config_from_dict
from train_judge.merge.engine import run_merge

MERGE_FILE = "merge.yaml"


def pocket_adapter_dir() -> Path:
    """The packaged folder: ``merge.yaml`` and the expert adapters it names."""
    return Path(str(resources.files("train_judge").joinpath("assets").joinpath("pocket_judge")))


def _adapter_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def merge_experts_onto(base: Path, folder: Path, out: Path) -> int:
    """Run ``folder/merge.yaml`` (expert paths relative to ``folder``) onto ``base`` into ``out``;
    returns the number of tensors written."""
    spec = read_yaml(folder / MERGE_FILE, "merge config") or {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{folder / MERGE_FILE}: expected a YAML mapping (method, models, ...)")
    spec = {**spec, "base_model": str(base), "output": str(out)}
    return run_merge(config_from_dict(spec, root=folder), overwrite=True).tensors


def build_pocket_judge(cache: Path | None = None) -> Path:
    """Return ``<cache>/pocket-judge``, building it from SmolLM2 and the shipped adapter if needed."""
    adapter = pocket_adapter_dir()
    if not (adapter / MERGE_FILE).is_file():
        raise ConfigError(
            f"the pocket judge adapter is missing from {adapter} (expected {MERGE_FILE} with the "
            "expert adapters); restore it from git or rebuild it with "
            "`python -m train_judge.pocket_pipeline` (see train_judge/README.md)"
        )
    root = Path(cache) if cache is not None else cache_dir()
    target = root / POCKET_NAME
    digest = _adapter_hash(adapter)
    if is_complete(target, digest):
        return target
    base = ensure_smollm2(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{POCKET_NAME}.tmp-", dir=root))
    try:
        count = merge_experts_onto(base, adapter, tmp)
        (tmp / MARKER).write_text(
            json.dumps(
                {
                    "format": POCKET_FORMAT,
                    "adapter": digest,
                    "tensors": count,
                    "form": "merge",
                }
            ),
            encoding="utf-8",
        )
        make_readable(tmp)  # mkdtemp makes it private; the cache may be shared
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m train_judge.pocket_judge",
        description=__doc__.split("\n\n")[0],
        formatter_class=PlainHelpFormatter,
    )
    ap.add_argument(
        "--cache", type=Path, default=None, help="cache folder (default: $PROM_REWARD_CACHE or ~/.cache/prom_reward)"
    )
    args = ap.parse_args(argv)
    try:
        print(build_pocket_judge(args.cache))
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
