"""Where the pocket judge lives (``<cache>/pocket-judge``, built by ``make setup`` with ``train_judge``): this
module only finds it, so the library never imports the training package."""

from __future__ import annotations

from pathlib import Path

from prom_reward.errors import ConfigError
from prom_reward.local.models import cache_dir, read_marker

POCKET_NAME = "pocket-judge"
POCKET_FORMAT = 1
"""The marker format a complete pocket-judge folder records (bumped when the build changes)."""


def is_complete(folder: Path, digest: str | None = None) -> bool:
    """True when ``folder`` holds a finished build (of the shipped adapters with hash ``digest``, when given)."""
    m = read_marker(folder)
    return (
        m is not None
        and m.get("format") == POCKET_FORMAT
        and (digest is None or m.get("adapter") == digest)
        and (folder / "model.safetensors").is_file()
    )


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
