"""How the reward settings are read: one name per setting (``foo_bar`` <-> ``--foo-bar`` <-> ``PROM_REWARD_FOO_BAR``
<-> YAML ``foo_bar``; ``judge``: YAML or explicit only), the YAML file, and the refusal of unknown names."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prom_reward.declared import refuse_unknown
from prom_reward.errors import ConfigError
from prom_reward.format.columns import column_flag

ENV_PREFIX = "PROM_REWARD_"
CONFIG_ENV = "PROM_REWARD_CONFIG"
NO_FLAG = ("judge",)
"""Settings given in YAML or explicitly only (no flag, no environment variable)."""
OTHER_ENV = ("CONFIG", "API_KEY", "TOKEN", "CACHE", "NO_ENGINE", "TEST_PRESTART", "JOB_CRASH", "RAY_BASELINE")
"""``PROM_REWARD_*`` variables that are not settings (the loader does not warn about them)."""


def flag_name(name: str) -> str:
    """The reward-server flag of a setting (``rubric_column`` -> ``--rubric-col`` as on every command; ``""``:
    none)."""
    if name in NO_FLAG:
        return ""
    return column_flag(name) if name.endswith("_column") else "--" + name.replace("_", "-")


def where(name: str) -> str:
    """Where a setting is given: ``--flag / PROM_REWARD_NAME / name``."""
    flag = flag_name(name)
    return f"{flag} / {ENV_PREFIX}{name.upper()} / {name}" if flag else f"{name} (YAML or explicit)"


def unknown_env(env: Mapping[str, str], names: Sequence[str]) -> list[str]:
    """A warning for each ``PROM_REWARD_*`` variable of ``env`` that is no setting nor in ``OTHER_ENV``, naming
    the closest setting."""
    known = {ENV_PREFIX + n.upper() for n in names if n not in NO_FLAG} | {ENV_PREFIX + n for n in OTHER_ENV}
    out = []
    for var in sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known):
        name = var[len(ENV_PREFIX) :].lower()
        if name in NO_FLAG:
            out.append(f"{var} is ignored: {name} is given in YAML or explicitly only")
            continue
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}?" if close else ""
        out.append(f"{var} is not a prom-reward setting and is ignored{hint}")
    return out


def read_text(path: str, fix: str, setting: str) -> str:
    """The UTF-8 text of the file at ``path``, else ``ConfigError`` about ``setting`` (``fix``: the file to give)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path!r} ({e.strerror or e}); fix: {fix}", setting) from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path!r} is not UTF-8 text (byte {e.start}: {e.object[e.start : e.start + 1]!r}); fix: save the file "
            "as UTF-8",
            setting,
        ) from None


def read_yaml(path: str, names: Sequence[str]) -> dict[str, Any]:
    """The settings of the YAML file at ``path`` (keys: the setting ``names``)."""
    import yaml

    fix = f"give a readable YAML file of settings (--config / {CONFIG_ENV} / config_file)"
    try:
        data = yaml.safe_load(read_text(path, fix, "config_file")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path!r} is not valid YAML ({e}); fix: correct the YAML", "config_file") from e
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path!r}: expected a mapping of settings, got {type(data).__name__}; fix: write one setting name: "
            "value per line",
            "config_file",
        )
    refuse_unknown(data, names, where=f"config_file {path!r}")
    return data


__all__ = ["CONFIG_ENV", "ENV_PREFIX", "flag_name", "read_text", "read_yaml", "unknown_env", "where"]
