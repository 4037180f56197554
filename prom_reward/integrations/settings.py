"""``RewardSettings``: the one settings model of the framework reward paths.

``prom-reward reward-server``, OpenRLHF's in-process ``reward_func`` and verl's ``compute_score``
read the same settings, with the same defaults, validated the same way, from the same sources in
one precedence:

1. explicit: the reward-server's command-line flags, verl's ``reward_kwargs``, the keywords of
   ``configure(...)`` / ``RewardSettings.load(explicit)``;
2. the environment: ``PROM_REWARD_<NAME>`` (``PROM_REWARD_FAILURE_REWARD=min``);
3. a YAML file: ``config_file`` (explicit) or ``PROM_REWARD_CONFIG``, keys = the setting names;
4. the defaults below.

The table in docs/openrlhf.md and docs/verl.md is ``settings_table()`` (a test keeps them equal).

Example:
    >>> s = RewardSettings.load({"rubric": "honesty"}, env={"PROM_REWARD_FAILURE_REWARD": "min",
    ...                                                      "PROM_REWARD_MAX_BATCH_SIZE": "64"})
    >>> s.rubric, s.max_batch_size, s.failure_reward.value, s.request_timeout
    ('honesty', 64, 'min', 170.0)
    >>> RewardSettings.load(env={})  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: failure reward: not set. ...
"""

from __future__ import annotations

import ast
import inspect
import logging
import os
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.resolve import RubricResolver
from prom_reward.integrations.batched_reward import FailurePolicy
from prom_reward.rewards.config import OVER_CONTEXT, RewardConfig
from prom_reward.rewards.outage import ON_EXHAUSTED, OutagePolicy

ENV_PREFIX = "PROM_REWARD_"
CONFIG_ENV = "PROM_REWARD_CONFIG"
OPENRLHF_CLIENT_TIMEOUT_S = 180.0
MODES = ("absolute", "pairwise_group")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardSettings:
    """The reward paths' settings (see the module docstring for the sources and their precedence)."""

    failure_reward: Any = None
    """**Required.** The reward of a sample the judge could not judge: a number or `min` (the lowest of the scale)."""

    judge_url: tuple[str, ...] = ()
    """OpenAI-compatible judge base URLs (`.../v1`, comma-separated); verl: its router when unset."""

    judge_model: str | None = None
    """With `judge_url`: the served model name (checked at start; default: the server's first model).
    Without: a model for an in-process vLLM judge."""

    gpu_memory_utilization: float | None = None
    """In-process `judge_model`: the share of the GPU its vLLM engine takes (unset: 0.9, a GPU of its own;
    beside a policy on the same GPU, e.g. OpenRLHF's rollout actors, give what the policy leaves)."""

    rubric: str = "helpfulness"
    """Built-in rubric name or a JSON/YAML rubric file (checked at start)."""

    mode: str = "absolute"
    """`absolute` or `pairwise_group`."""

    score: str = "sample"
    """`sample`, `mean` or `expected`."""

    normalize: str | None = None
    """`unit` ([0, 1]) or `symmetric` ([-1, 1]); unset: raw grades."""

    max_tokens: int | None = None
    """The judge's feedback tokens at most (unset: the judge's 1,024)."""

    over_context: str = "truncate"
    """A response over the judge's context: `truncate` (shortened to fit, counted) or `fail` (that sample
    alone fails)."""

    group_size: int | None = None
    """`pairwise_group`: samples per prompt (OpenRLHF `--rollout.n_samples_per_prompt`, verl `rollout.n`)."""

    group_wait_s: float = 60.0
    """`pairwise_group`: judge a group still short after this many seconds."""

    batch_window_ms: float = 50.0
    """How long a sample waits for others before its batch goes to the judge."""

    max_batch_size: int = 256
    """Samples per judge call at most (a larger request is split)."""

    max_concurrent_batches: int = 4
    """Judge calls in flight at once (an HTTP judge; an in-process one takes one at a time)."""

    request_timeout: float = 170.0
    """Seconds a sample may wait for its reward; then it gets the failure reward (keep it under OpenRLHF's 180)."""

    outage_budget_s: float = 150.0
    """Seconds a failing judge (unreachable, 5xx, hung) is retried, within `request_timeout`."""

    call_timeout_s: float | None = None
    """Seconds one judge HTTP call may take; unset: half the time left to the request's deadline."""

    on_outage: str = "fail"
    """Past the outage budget: `fail` (the failure reward, with the cause) or `raise` (stop training with the cause)."""

    strip: tuple[str, ...] = ()
    """OpenRLHF: end-of-text strings removed from the end of responses (comma-separated)."""

    judge: dict[str, Any] = field(default_factory=dict)
    """More `PrometheusJudge` options, e.g. `{sampling: {temperature: 0}}` (YAML or explicit only)."""

    reward: dict[str, Any] = field(default_factory=dict)
    """More `PrometheusReward` options, e.g. `{log_feedback: false}` (YAML or explicit only)."""

    def __post_init__(self) -> None:
        value = self.failure_reward.value if isinstance(self.failure_reward, FailurePolicy) else self.failure_reward
        try:
            object.__setattr__(self, "failure_reward", FailurePolicy(value))
        except ConfigError as e:
            raise ConfigError(f"{e} [{where('failure_reward')}]") from None
        for f in fields(self):
            object.__setattr__(self, f.name, _convert(f.name, getattr(self, f.name)))
        choices = {"mode": MODES, "over_context": OVER_CONTEXT, "on_outage": ON_EXHAUSTED}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ConfigError(f"{name}: expected one of {', '.join(valid)}, got {getattr(self, name)!r}")
        for name in ("batch_window_ms", "group_wait_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: expected a number >= 0, got {getattr(self, name)!r}")
        for name in ("max_batch_size", "max_concurrent_batches", "request_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: expected a number > 0, got {getattr(self, name)!r}")
        share = self.gpu_memory_utilization
        if share is not None and not 0.0 < share <= 1.0:
            raise ConfigError(
                f"gpu_memory_utilization: expected a share in (0, 1], got {share!r} [{where('gpu_memory_utilization')}]"
            )
        for url in self.judge_url:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"judge_url: expected 'http(s)://host:port/v1' URLs, got {url!r}")
        if self.mode == "pairwise_group":
            if self.group_size is None or self.group_size < 2:
                raise ConfigError(
                    "group_size: mode pairwise_group compares the samples of one prompt, which the "
                    "trainer sends one at a time: give group_size = samples per prompt (>= 2; OpenRLHF "
                    "--rollout.n_samples_per_prompt, verl actor_rollout_ref.rollout.n), got "
                    f"{self.group_size!r} [{where('group_size')}]"
                )
            if self.group_wait_s >= self.request_timeout:
                raise ConfigError(
                    f"group_wait_s ({self.group_wait_s} s) must be under request_timeout "
                    f"({self.request_timeout} s), or a short group times out before it is judged"
                )
        self.outage()  # validates the outage fields
        reward_config = self.reward_config()  # validates score, normalize, the reward options
        self.failure_reward.value_for(reward_config)  # 'min' has no value for Bradley-Terry
        try:
            RubricResolver(self.rubric, need_scores=self.mode == "absolute")
        except InputError as e:
            raise ConfigError(f"rubric: {e}") from e
        if self.request_timeout >= OPENRLHF_CLIENT_TIMEOUT_S:
            logger.warning(
                "request_timeout %.0f s is not under OpenRLHF's client timeout of 180 s: a slow batch "
                "then makes OpenRLHF retry instead of getting an answer",
                self.request_timeout,
            )

    # -- sources ----------------------------------------------------------------------
    @classmethod
    def load(cls, explicit: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> RewardSettings:
        """The settings from ``explicit`` > ``env`` (``PROM_REWARD_*``; None: ``os.environ``) > the YAML file
        (``explicit["config_file"]`` or ``PROM_REWARD_CONFIG``) > defaults. Unknown names raise ``ConfigError``."""
        env = os.environ if env is None else env
        given = {k: v for k, v in (explicit or {}).items() if v is not None}
        path = given.pop("config_file", None) or env.get(CONFIG_ENV) or None
        names = setting_names()
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ConfigError(f"unknown setting(s) {unknown}; valid: {', '.join(names)} (and config_file)")
        values: dict[str, Any] = dict(_read_yaml(str(path))) if path else {}
        for name in names:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is not None and raw.strip() and name not in ("judge", "reward"):
                values[name] = raw.strip()
        values.update(given)
        return cls(**values)

    # -- what the settings build ------------------------------------------------------
    def outage(self) -> OutagePolicy:
        """The reward's ``OutagePolicy``."""
        try:
            return OutagePolicy(
                budget_s=self.outage_budget_s, call_timeout_s=self.call_timeout_s, on_exhausted=self.on_outage
            )
        except ConfigError as e:
            raise ConfigError(f"outage settings: {e}") from e

    def reward_config(self) -> RewardConfig:
        """The ``RewardConfig`` of the reward these settings build."""
        try:
            return RewardConfig(
                rubric=self.rubric,
                mode=self.mode,
                score=self.score,
                normalize=self.normalize,
                over_context=self.over_context,
                outage=self.outage(),
                **self.reward,
            )
        except TypeError as e:
            raise ConfigError(
                f"reward: {e}; its keys are PrometheusReward options other than the settings "
                "rubric, mode, score, normalize, over_context"
            ) from None

    def judge_spec(self, router_address: str | None = None, tokenizer: Any = None) -> dict[str, Any]:
        """The ``PrometheusJudge`` options: ``judge_url`` (else verl's router at ``router_address``) or an
        in-process ``judge_model``. Behind verl's router, ``tokenizer`` (the judge's) tells whether its chat
        template takes a system message and which special tokens to neutralise."""
        spec = dict(self.judge)
        urls = list(self.judge_url) or ([f"http://{router_address}/v1"] if router_address else [])
        if urls:
            spec.update(backend="openai", base_url=urls)
            if self.judge_model:
                spec["model"] = self.judge_model
        elif self.judge_model:
            spec = {"model": self.judge_model, "backend": "vllm", **spec}
            if self.gpu_memory_utilization is not None and spec["backend"] == "vllm":
                spec.setdefault("gpu_memory_utilization", self.gpu_memory_utilization)
        else:
            raise ConfigError(
                "no judge: set judge_url (PROM_REWARD_JUDGE_URL: comma-separated OpenAI-compatible judge "
                "URLs, e.g. http://judge:8000/v1) or judge_model (an in-process vLLM judge); under verl, "
                "reward.reward_model.enable=True serves the judge itself"
            )
        if self.max_tokens:
            spec["sampling"] = {**dict(spec.get("sampling") or {}), "max_tokens": self.max_tokens}
        if router_address and not self.judge_url and tokenizer is not None:
            from prom_reward.format.wire import template_accepts_system

            spec.setdefault("system_role", template_accepts_system(tokenizer))
            spec.setdefault("special_tokens", list(getattr(tokenizer, "all_special_tokens", None) or ()))
        return spec

    def build_reward(self, router_address: str | None = None, tokenizer: Any = None) -> Any:
        """The ``PrometheusReward`` these settings describe (its judge is built on first use)."""
        from prom_reward.rewards.reward import PrometheusReward

        return PrometheusReward(self.judge_spec(router_address, tokenizer), self.reward_config())


# -- conversions ------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _types() -> dict[str, Any]:
    return typing.get_type_hints(RewardSettings)


def _convert(name: str, value: Any) -> Any:
    """``value`` (a string from the environment, or a YAML value) as the field's type."""
    kind = _types()[name]
    if name == "failure_reward":
        return value
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    optional = type(None) in typing.get_args(kind)
    base = args[0] if optional and args else kind
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))):
        return None
    origin = typing.get_origin(base)
    try:
        if origin is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip() for v in items if str(v).strip())
        if origin is dict:
            if not isinstance(value, Mapping):
                raise TypeError
            return _plain(value)
        if base is bool or isinstance(value, bool) and base in (int, float):
            raise TypeError
        if base is int:
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if base is float:
            return float(value)
        if base is str:
            if not isinstance(value, str):
                raise TypeError
            return value
    except (TypeError, ValueError):
        raise ConfigError(f"{name} ({ENV_PREFIX}{name.upper()}): expected {_type_name(kind)}, got {value!r}") from None
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


def _read_yaml(path: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise ConfigError(f"config_file: cannot read {path!r} ({e}); fix {CONFIG_ENV} / config_file") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"config_file {path!r}: not valid YAML ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config_file {path!r}: expected a mapping of settings, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(setting_names()))
    if unknown:
        raise ConfigError(f"config_file {path!r}: unknown key(s) {unknown}; valid: {', '.join(setting_names())}")
    return data


# -- documentation ----------------------------------------------------------------------
def setting_names() -> list[str]:
    """The setting names, in declaration order."""
    return [f.name for f in fields(RewardSettings)]


def field_docs() -> dict[str, str]:
    """Each setting's docstring (the string literal under its field)."""
    tree = ast.parse(inspect.getsource(RewardSettings))
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


def where(name: str) -> str:
    """Where a setting is given: ``--flag / PROM_REWARD_NAME / name``."""
    return f"{flag_name(name)} / {ENV_PREFIX}{name.upper()} / {name}"


def flag_name(name: str) -> str:
    """The reward-server flag of a setting (``judge_url`` -> ``--server``, ``max_batch_size`` ->
    ``--max-batch-size``)."""
    return {"judge_url": "--server", "judge_model": "--model", "judge": "", "reward": ""}.get(
        name, "--" + name.replace("_", "-")
    )


def default_text(name: str) -> str:
    f = next(f for f in fields(RewardSettings) if f.name == name)
    if f.default is MISSING or name == "failure_reward":
        return "(required)" if name == "failure_reward" else "{}"
    value = f.default
    if value is None or value == ():
        return "unset"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def settings_table() -> str:
    """The markdown table of every setting: name, environment variable, reward-server flag, default, meaning."""
    docs = field_docs()
    rows = ["| setting | environment | reward-server flag | default | meaning |", "|---|---|---|---|---|"]
    for name in setting_names():
        env = "" if name in ("judge", "reward") else f"`{ENV_PREFIX}{name.upper()}`"
        flag = flag_name(name)
        rows.append(f"| `{name}` | {env} | {f'`{flag}`' if flag else ''} | {default_text(name)} | {docs[name]} |")
    return "\n".join(rows)


__all__ = ["CONFIG_ENV", "ENV_PREFIX", "RewardSettings", "field_docs", "flag_name", "setting_names", "settings_table"]
