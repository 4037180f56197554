"""How the reward settings are read: their flag / environment / YAML names, text conversions, the YAML file,
and the former names that are refused with the new one.

One name per setting, mapped mechanically: field ``foo_bar`` <-> flag ``--foo-bar`` <-> environment
``PROM_REWARD_FOO_BAR`` <-> YAML key ``foo_bar``; a column setting's flag is spelled as on every
command (``rubric_column`` <-> ``--rubric-col``, ``prom_reward.format.columns``). ``judge`` (a mapping of
``PrometheusJudge`` options) has
no flag and no variable: it is given in YAML or explicitly.

Example:
    >>> flag_name("max_batch_size"), convert("log_feedback", "false", bool), convert("x", "2", float | str)
    ('--max-batch-size', False, 2.0)
    >>> flag_name("checklist_column")
    '--checklist-col'
    >>> refuse_renamed({"on_outage": "fail"}, None, "")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: on_outage was renamed outage_on_exhausted; fix: ...
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError
from prom_reward.format.columns import column_flag

ENV_PREFIX = "PROM_REWARD_"
CONFIG_ENV = "PROM_REWARD_CONFIG"
NO_FLAG = ("judge",)
"""Settings given in YAML or explicitly only (no flag, no environment variable)."""
OTHER_ENV = ("API_KEY", "TOKEN", "CACHE", "NO_ENGINE", "TEST_PRESTART", "JOB_CRASH", "RAY_BASELINE")
"""``PROM_REWARD_*`` variables that are not settings (the judge's API key, the reward server's token, the model
cache, test and benchmark hooks): the settings loader does not warn about them."""

RENAMED = {
    "judge_url": "server",
    "base_url": "server",
    "judge_model": "model",
    "on_outage": "outage_on_exhausted",
    "on_exhausted": "outage_on_exhausted",
    "call_timeout_s": "outage_call_timeout_s",
    "budget_s": "outage_budget_s",
    "truncate": "over_context",
    "truncate_response": "over_context",
    "reward": "",
}
"""Former names of settings -> the one name now ("": its keys are settings of their own)."""

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def flag_name(name: str) -> str:
    """The reward-server flag of a setting (``max_batch_size`` -> ``--max-batch-size``; a column setting as every
    command spells it, ``rubric_column`` -> ``--rubric-col``; ``""``: none)."""
    if name in NO_FLAG:
        return ""
    return column_flag(name) if name.endswith("_column") else "--" + name.replace("_", "-")


def refuse_renamed(given: Iterable[str], valid: Sequence[str] | None, source: str) -> None:
    """Raise ``ConfigError`` for a former name (saying the new one) or, with ``valid``, a name not in it."""
    for old in given:
        if old in RENAMED:
            new = RENAMED[old]
            where = f" ({source})" if source else ""
            if not new:
                raise ConfigError(
                    f"{old}{where}: its keys are settings of their own now; fix: give each at the top level "
                    "(e.g. log_feedback: false, not reward: {log_feedback: false})"
                )
            flag = flag_name(new)
            raise ConfigError(
                f"{old}{where} was renamed {new}; fix: give {new} ({flag} / {ENV_PREFIX}{new.upper()} / YAML {new})"
            )
    if valid is not None:
        unknown = sorted(set(given) - set(valid))
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {unknown}{f' in {source}' if source else ''}; valid: {', '.join(valid)}"
            )


def unknown_env(env: Mapping[str, str], names: Sequence[str]) -> list[str]:
    """A warning for each ``PROM_REWARD_*`` variable of ``env`` that is no setting of ``names`` nor one of
    ``OTHER_ENV`` (a typo is otherwise ignored without a word), naming the closest setting."""
    known = {ENV_PREFIX + n.upper() for n in names if n not in NO_FLAG} | {ENV_PREFIX + n for n in OTHER_ENV}
    known.add(CONFIG_ENV)
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


def convert(name: str, value: Any, kind: Any) -> Any:
    """``value`` (a string from the environment or a flag, or a YAML value) as ``kind``, the field's type."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    optional = type(None) in typing.get_args(kind)
    base = args[0] if optional and len(args) == 1 else kind
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))):
        return None
    if kind is Any:
        return value
    origin = typing.get_origin(base)
    try:
        if origin is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip() for v in items if str(v).strip())
        if origin is dict:
            if not isinstance(value, Mapping):
                raise TypeError
            return _plain(value)
        if origin in (typing.Union, types.UnionType):  # e.g. float | str: a number where it reads as one
            return _number_or_text(value)
        if base is bool:
            return _bool(value)
        if isinstance(value, bool) and base in (int, float):
            raise TypeError
        if base is int:
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if base is float:
            return float(value)
        if base is str and not isinstance(value, str):
            raise TypeError
    except (TypeError, ValueError, OverflowError):  # OverflowError: int("1e999"), an infinite count
        raise ConfigError(f"{name} ({ENV_PREFIX}{name.upper()}): expected {_type_name(kind)}, got {value!r}") from None
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE + _FALSE:
        return text in _TRUE
    raise ValueError(value)


def _number_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value.strip()
    return value


def _plain(value: Any) -> Any:
    """Nested mappings and sequences (OmegaConf's included) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def read_yaml(path: str, names: Sequence[str]) -> dict[str, Any]:
    """The settings of the YAML file at ``path`` (keys: the setting ``names``)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise ConfigError(
            f"config_file: cannot read {path!r} ({e.strerror or e}); fix: give a readable YAML file of settings "
            f"(--config / {CONFIG_ENV} / config_file)"
        ) from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config_file {path!r}: not UTF-8 text (byte {e.start}: {e.object[e.start : e.start + 1]!r}); fix: save "
            "the file as UTF-8"
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config_file {path!r}: not valid YAML ({e}); fix: correct the YAML") from e
    if not isinstance(data, dict):
        raise ConfigError(
            f"config_file {path!r}: expected a mapping of settings, got {type(data).__name__}; fix: write one "
            "setting name: value per line"
        )
    refuse_renamed([str(k) for k in data], names, f"config_file {path!r}")
    return data


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it) of the dataclass ``cls``, read once per process: CPython
    3.11's AST builder keeps its recursion depth process-wide, so a parse racing another thread's (torch's
    scripting in an engine's start-up) can fail with ``SystemError``."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "RENAMED",
    "convert",
    "field_docs",
    "flag_name",
    "read_yaml",
    "refuse_renamed",
    "unknown_env",
]
