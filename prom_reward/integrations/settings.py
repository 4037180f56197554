"""``RewardSettings``: the settings of ``reward-server``, OpenRLHF's ``reward_func`` and verl's ``compute_score``,
read from explicit values > ``PROM_REWARD_<NAME>`` > a YAML file > defaults, each declared once (docs/openrlhf.md):
``RewardConfig``'s fields, its ``outage``'s as ``outage_<field>``, and the judge, batching and deadlines."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from prom_reward.backends.openai_server import is_http_url
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.core.presets import default_format
from prom_reward.declared import Declared, Rules, check, declared, parse, read_text, refuse_unknown, setting
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.columns import column_flag
from prom_reward.format.rubrics import RubricResolver
from prom_reward.integrations.batched_reward import BatchedReward, FailurePolicy
from prom_reward.rewards.config import RewardConfig, get_judge_format_setting
from prom_reward.rewards.outage import OutagePolicy

OPENRLHF_CLIENT_TIMEOUT_S = 180.0
FRAMEWORK_MODES = ("absolute", "pairwise_group")
"""The reward modes (of ``rewards.config.MODES``) the framework paths (OpenRLHF, verl) take: a score per sample."""
OUTAGE_PREFIX = "outage_"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewardSettings:
    """The reward paths' settings: the reward, and what a framework needs around it."""

    reward: RewardConfig = field(default_factory=RewardConfig)
    """The reward: every ``RewardConfig`` field is a setting of its own name (``outage``'s as ``outage_<name>``)."""

    server: tuple[str, ...] = setting(
        (), help="OpenAI-compatible judge base URLs (`.../v1`, comma-separated); verl: its router when unset."
    )
    model: str | None = setting(
        None,
        help="""With `server`: the served model name (checked at start; default: the server's first model).
        Without: a model for an in-process vLLM judge.""",
    )
    gpu_memory_utilization: float | None = setting(
        None,
        help="""In-process `model`: the share of the GPU its vLLM engine takes (unset: 0.9, a GPU of its own;
        beside a policy on the same GPU, e.g. OpenRLHF's rollout actors, give what the policy leaves).""",
        gt=0,
        le=1,
    )
    max_tokens: int | None = setting(None, help="The judge's feedback tokens at most (unset: the judge's 1,024).", ge=1)
    group_size: int | None = setting(
        None,
        help="`pairwise_group`: samples per prompt (OpenRLHF `--rollout.n_samples_per_prompt`, verl `rollout.n`).",
    )
    group_wait_s: float = setting(
        60.0, help="`pairwise_group`: judge a group still short after this many seconds.", ge=0
    )
    batch_window_ms: float = setting(
        50.0, help="How long a sample waits for others before its batch goes to the judge.", ge=0
    )
    max_batch_size: int = setting(256, help="Samples per judge call at most (a larger request is split).", ge=1)
    max_concurrent_batches: int = setting(
        4, help="Judge calls in flight at once (an HTTP judge; an in-process one takes one at a time).", ge=1
    )
    request_timeout: float = setting(
        170.0,
        help="Seconds a sample may wait for its reward; then it gets the failure reward (keep it under OpenRLHF's "
        "180).",
        gt=0,
    )
    degraded_failure_share: float = setting(
        0.5,
        help="`/health` says `degraded` while more than this share of the last 100 samples failed (1: never).",
        ge=0,
        le=1,
    )
    strip: tuple[str, ...] = setting(
        (), help="OpenRLHF: end-of-text strings removed from the end of responses (comma-separated)."
    )
    judge: dict[str, Any] = setting(
        factory=dict,
        help="More `PrometheusJudge` options, e.g. `{sampling: {temperature: 0}}` (YAML or explicit only).",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.reward, RewardConfig):
            raise ConfigError(f"expected a RewardConfig, got {type(self.reward).__name__}", "reward")
        self.failure_reward.value_for(self.reward)  # required here; 'min' has no value for Bradley-Terry
        urls = tuple(u.strip() for item in self.server for u in item.split(",") if u.strip())  # --server a,b too
        object.__setattr__(self, "server", urls)
        check(self)
        cfg = self.reward
        if cfg.mode not in FRAMEWORK_MODES:
            raise ConfigError(
                f"the framework reward paths take one of {', '.join(FRAMEWORK_MODES)}, got {cfg.mode!r}; fix: give "
                "one of them",
                "mode",
            )
        for url in self.server:
            if not is_http_url(url):
                raise ConfigError(
                    f"expected 'http(s)://host:port/v1' URLs, got {url!r}; fix: give the judge's URL with its scheme "
                    "and /v1",
                    "server",
                )
        if cfg.mode == "pairwise_group":
            if self.group_size is None or self.group_size < 2:
                raise ConfigError(
                    "{mode} pairwise_group compares the samples of one prompt, which the trainer sends one at a "
                    f"time, got {self.group_size!r}; fix: give {{group_size}} the samples per prompt (>= 2; OpenRLHF "
                    "--rollout.n_samples_per_prompt, verl actor_rollout_ref.rollout.n)",
                    "group_size",
                    ("mode",),
                )
            if self.group_wait_s >= self.request_timeout:
                raise ConfigError(
                    f"{self.group_wait_s} s must be under {{request_timeout}} ({self.request_timeout} s), or a short "
                    "group times out before it is judged; fix: give a shorter wait",
                    "group_wait_s",
                    ("request_timeout",),
                )
        if self.request_timeout >= OPENRLHF_CLIENT_TIMEOUT_S:
            logger.warning(
                "request_timeout %.0f s is not under OpenRLHF's client timeout of 180 s: a slow batch "
                "then makes OpenRLHF retry instead of getting an answer",
                self.request_timeout,
            )

    @classmethod
    def load(cls, explicit: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> RewardSettings:
        """The settings from ``explicit`` > ``env`` (None: ``os.environ``) > the YAML file (``config_file`` or
        ``PROM_REWARD_CONFIG``) > defaults; unknown names raise ``ConfigError`` (unknown variables: a warning)."""
        env = os.environ if env is None else env
        given = {k: v for k, v in (explicit or {}).items() if v is not None}
        path = given.pop("config_file", None) or env.get(CONFIG_ENV) or None
        names = setting_names()
        refuse_unknown(given, [*names, "config_file"])
        values: dict[str, Any] = dict(read_yaml(str(path), names)) if path else {}
        known = {ENV_PREFIX + n.upper() for n in names if n not in NO_FLAG} | {ENV_PREFIX + n for n in OTHER_ENV}
        for var in sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known):  # not a setting: warned
            name = var[len(ENV_PREFIX) :].lower()
            if name in NO_FLAG:
                logger.warning("%s is ignored: %s is given in YAML or explicitly only", var, name)
                continue
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}?" if close else ""
            logger.warning("%s is not a prom-reward setting and is ignored%s", var, hint)
        variables = {name: env.get(ENV_PREFIX + name.upper(), "").strip() for name in names if name not in NO_FLAG}
        values.update((name, text) for name, text in variables.items() if text)
        values.update(given)
        return cls.from_values(values)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RewardSettings:
        """The settings of flat ``values`` (name -> text or typed value); a refusal names where it is given."""
        refuse_unknown(values, setting_names())
        declarations = {name: (python.rsplit(".", 1)[0], d) for name, python, d in settings_fields()}
        parts: dict[str, dict[str, Any]] = {"RewardSettings": {}, "RewardConfig": {}, "RewardConfig.outage": {}}
        try:
            for name, value in values.items():
                part, d = declarations[name]
                parts[part][d.name] = parse(name, value, d.kind)
            try:
                policy = OutagePolicy(**parts["RewardConfig.outage"])
            except ConfigError as e:
                raise e.said_as(OUTAGE_PREFIX + e.setting) from None
            config = RewardConfig(**parts["RewardConfig"], outage=policy)
            settings = cls(reward=config, **parts["RewardSettings"])
            fmt = get_judge_format_setting(config.format or default_format(settings.model))
            try:  # the judge format says whether the rubric fits the mode (``around``'s reward checked it when built)
                RubricResolver(
                    config.rubric, judge_format=fmt, task="absolute" if config.mode == "absolute" else "relative"
                )
            except InputError as e:
                raise ConfigError(str(e), "rubric") from e
        except ConfigError as e:
            raise (e.said_as(e.setting, where(e.setting)) if e.setting in declarations else e) from None
        return settings

    @classmethod
    def around(
        cls, config: Any, explicit: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> RewardSettings:
        """The settings around a ready reward's ``RewardConfig`` ``config``, the others loaded; a reward field in
        ``explicit`` is refused (it belongs in ``config``)."""
        reward = {name for name, python, _ in settings_fields() if python.startswith("RewardConfig.")}
        given = sorted(set(explicit or {}) & reward - {"failure_reward"})
        if given:
            raise ConfigError(
                "reward settings of a ready reward are its RewardConfig's; fix: give them to the reward's "
                "RewardConfig, not to configure()",
                ", ".join(given),
            )
        loaded = cls.load(explicit, env)
        failure = config.failure_reward if config.failure_reward is not None else loaded.reward.failure_reward
        return dataclasses.replace(loaded, reward=dataclasses.replace(config, failure_reward=failure))

    @property
    def failure_reward(self) -> FailurePolicy:
        """The reward's ``failure_reward`` as the policy that fills failed samples."""
        return FailurePolicy(self.reward.failure_reward)

    def judge_spec(self, router_address: str | None = None, tokenizer: Any = None) -> JudgeSpec:
        """The judge: ``server`` (else verl's router at ``router_address``), an in-process ``model``, or the ``judge``
        setting naming its ``backend``. Behind verl's router, ``tokenizer`` (the judge's) tells whether its chat
        template takes a system message and which special tokens to neutralise."""
        urls = list(self.server) or ([f"http://{router_address}/v1"] if router_address else [])
        missing = (
            "no judge: set server (PROM_REWARD_SERVER: comma-separated OpenAI-compatible judge URLs, e.g. "
            "http://judge:8000/v1) or model (an in-process vLLM judge); under verl, reward.reward_model.enable=True "
            "serves the judge itself"
        )
        spec = framework_judge(self.judge, urls, self.model, self.max_tokens, missing)
        if spec.backend == "vllm" and spec.gpu_memory_utilization is None:
            spec = dataclasses.replace(spec, gpu_memory_utilization=self.gpu_memory_utilization)
        if router_address and not self.server and tokenizer is not None:
            from prom_reward.format.wire import template_accepts_system

            special = list(getattr(tokenizer, "all_special_tokens", None) or ())
            given = {"system_role": template_accepts_system(tokenizer), "special_tokens": special}
            spec = dataclasses.replace(spec, options={**given, **spec.options})
        return spec

    def build_reward(self, router_address: str | None = None, tokenizer: Any = None) -> Any:
        """The ``PrometheusReward`` these settings describe (its judge is built on first use)."""
        from prom_reward.rewards.reward import PrometheusReward

        return PrometheusReward(self.judge_spec(router_address, tokenizer), self.reward)

    def batched(self, reward: Any) -> BatchedReward:
        """``reward`` behind a ``BatchedReward`` of these settings' batching."""
        return BatchedReward(
            reward,
            max_wait_s=self.batch_window_ms / 1000,
            max_batch_size=self.max_batch_size,
            max_concurrent=self.max_concurrent_batches,
            group_size=self.group_size,
            group_wait_s=self.group_wait_s,
        )


def framework_judge(
    judge: Mapping[str, Any], urls: list[str], model: str | None, max_tokens: int | None, missing: str = ""
) -> JudgeSpec:
    """The judge of a reward path (these settings, the verifiers judge): behind the ``urls`` (serving ``model``),
    else an in-process ``model``, else ``judge`` naming its ``backend`` (else ``ConfigError(missing)``), with
    ``judge``'s other options and ``max_tokens``; a bad judge option is named ``judge.<name>``."""
    if not urls and not model and "backend" not in judge:
        raise ConfigError(missing)
    try:
        if urls:
            return JudgeSpec.of(judge, server=tuple(urls), model=model, max_tokens=max_tokens)
        return JudgeSpec.of({"model": model, **judge}, max_tokens=max_tokens)
    except ConfigError as e:
        raise (e.said_as(f"judge.{e.setting}") if e.setting in judge else e) from None


# -- the settings: names, types, docs ---------------------------------------------------
@lru_cache(maxsize=1)
def settings_fields() -> tuple[tuple[str, str, Declared], ...]:
    """Every setting as (name, Python name, declaration), in table order."""
    sources = (
        (RewardSettings, "RewardSettings.{}", "{}"),
        (RewardConfig, "RewardConfig.{}", "{}"),
        (OutagePolicy, "RewardConfig.outage.{}", OUTAGE_PREFIX + "{}"),
    )
    return tuple(
        (flat.format(d.name), python.format(d.name), d)
        for cls, python, flat in sources
        for d in declared(cls)
        if d.name != "outage"
    )


def setting_names() -> list[str]:
    """The setting names, in table order."""
    return [name for name, _, _ in settings_fields()]


def _default_text(name: str, default: Any) -> str:
    if name == "failure_reward":
        return "(required)"
    if default is None or default == ():
        return "unset"
    if default == {}:
        return "{}"
    return f"`{default:g}`" if isinstance(default, float) else f"`{default}`"


def settings_table() -> str:
    """The markdown table of every setting (docs/openrlhf.md), from the declarations."""
    rows = [
        "| Python | YAML key | reward-server flag | environment | default | takes | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, python, d in settings_fields():
        flag = flag_name(name)
        env = f"`{ENV_PREFIX}{name.upper()}`" if flag else ""
        flag_cell = f"`{flag}`" if flag else ""
        takes = d.rules.expected(d.kind) if d.kind in _SIMPLE or d.rules != Rules(d.rules.help) else ""
        cells = [f"`{python}`", f"`{name}`", flag_cell, env, _default_text(name, d.default), takes, d.rules.help]
        rows.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(rows)


_SIMPLE = (int, float, bool, str, int | None, float | None, str | None)


# -- where they are read: one name per setting (``foo_bar`` <-> ``--foo-bar`` <-> ``PROM_REWARD_FOO_BAR`` <-> YAML
# ``foo_bar``; ``judge``: YAML or explicit only), the YAML file
ENV_PREFIX = "PROM_REWARD_"
CONFIG_ENV = "PROM_REWARD_CONFIG"
NO_FLAG = ("judge",)
"""Settings given in YAML or explicitly only (no flag, no environment variable)."""
OTHER_ENV = ("CONFIG", "API_KEY", "TOKEN", "CACHE", "NO_ENGINE", "TEST_PRESTART", "JOB_CRASH", "RAY_BASELINE")
"""``PROM_REWARD_*`` variables that are not settings (the loader does not warn about them)."""


def flag_name(name: str) -> str:
    """The flag of a setting (``rubric_column`` -> ``--rubric-col`` as on every command; ``""``: none)."""
    if name in NO_FLAG:
        return ""
    return column_flag(name) if name.endswith("_column") else "--" + name.replace("_", "-")


def where(name: str) -> str:
    """Where a setting is given: ``--flag / PROM_REWARD_NAME / name``."""
    flag = flag_name(name)
    return f"{flag} / {ENV_PREFIX}{name.upper()} / {name}" if flag else f"{name} (YAML or explicit)"


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


__all__ = ["CONFIG_ENV", "ENV_PREFIX", "RewardSettings", "setting_names", "settings_fields", "settings_table", "where"]
