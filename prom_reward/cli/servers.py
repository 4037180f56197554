"""``prom-reward serve`` (dedicated vLLM judge servers), ``reward-server`` (the judge as OpenRLHF's remote
reward model) and ``openrlhf-func-path``."""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from typing import Any

from prom_reward.backends.factory import check_model_folder
from prom_reward.backends.servers import JudgeServers, ServeConfig, check_port_free
from prom_reward.backends.vllm_options import VLLMOptions
from prom_reward.cli.voice import add_judge_options, judge_format_name, judge_spec
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.declared import add_settings, declared, given_settings
from prom_reward.errors import BackendError, ConfigError

SERVE = ("gpus", "replicas", "port", "host", "log_dir", "startup_timeout")
"""The ``ServeConfig`` and ``VLLMOptions`` settings ``prom-reward serve`` has a flag for."""
ENGINE = ("tensor_parallel_size", "max_model_len", "gpu_memory_utilization", "dtype", "seed", "tokenizer_mode")


def add_server_parsers(sub: Any) -> None:
    """The ``serve``, ``reward-server`` and ``openrlhf-func-path`` subcommands."""
    p = sub.add_parser("serve", help="launch dedicated vLLM judge servers and keep them up until Ctrl-C")
    p.add_argument("--model", required=True, help="hub id, folder or preset (e.g. prometheus-7b-v2.0)")
    add_settings(p, ServeConfig, SERVE)
    p.add_argument(
        "--format",
        type=judge_format_name,
        help="judge format the clients of these servers prompt in (docs/formats.md): checked against the model's "
        "preset and printed in the `use:` line; default: the preset's, else prometheus2",
    )
    e = p.add_argument_group(
        "engine (prom_reward.backends.vllm_options.VLLMOptions; a preset's values, "
        "then vLLM's defaults where not given)"
    )
    add_settings(e, VLLMOptions, ENGINE)
    e.add_argument("--no-prefix-caching", action="store_true", help="turn off vLLM's prefix caching (default: on)")
    e.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="no CUDA graphs / compilation: faster start, slower generation (default: eager on vLLM's CPU build, "
        "compiled on a GPU)",
    )
    p.set_defaults(func=cmd_serve)
    _add_reward_server_parser(sub)
    f = sub.add_parser("openrlhf-func-path", help="print the reward_func file for OpenRLHF --reward.remote_url")
    f.set_defaults(func=cmd_openrlhf_func_path)


def serve_config(args: Any) -> ServeConfig:
    """The ``ServeConfig`` of ``prom-reward serve``'s options: the flags given over a preset's engine options."""
    from prom_reward.core.presets import find_preset_for_model, resolve_model_path

    preset = find_preset_for_model(args.model)
    settings = {**(preset.engine if preset else {}), **given_settings(args, VLLMOptions, (*ENGINE, "enforce_eager"))}
    if args.no_prefix_caching:
        settings["enable_prefix_caching"] = False
    model = resolve_model_path(preset.model if preset else args.model)
    check_model_folder(model)  # a mistyped preset or folder fails here, not in a server's log
    return ServeConfig(
        model=model, engine=VLLMOptions.from_settings(settings), **given_settings(args, ServeConfig, SERVE)
    )


def serve_format(args: Any) -> str:
    """The judge format clients of ``serve``'s servers prompt in: ``--format``, else the model preset's, else
    ``prometheus2`` (another than a preset's own: a warning)."""
    from prom_reward.core.presets import default_format, find_preset_for_model

    preset = find_preset_for_model(args.model)
    trained = preset.format if preset else None
    name: str = args.format or default_format(args.model)
    if trained and name != trained:
        print(
            f"prom-reward: warning: serve: {args.model} was trained on the {trained} format, not {name}; its "
            f"outputs may not follow {name}'s verdict rules; fix: give --format {trained}, or leave --format out",
            file=sys.stderr,
            flush=True,
        )
    return name


def cmd_serve(args: Any) -> int:
    cfg = serve_config(args)
    fmt = serve_format(args)
    servers = JudgeServers(cfg)
    received: list[int] = []  # the signals received (a list: threading.Event.set may deadlock in a handler)
    # SIGINT too: a process started in the background by a non-interactive shell inherits it ignored
    previous = {
        sig: signal.signal(sig, lambda signum, _: received.append(signum)) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        urls = servers.start()
        print("judge servers ready: " + " ".join(urls), flush=True)
        print("logs: " + " ".join(str(p) for p in servers.log_paths), flush=True)
        print("use: --server " + " --server ".join(urls) + f" --format {fmt}   (Ctrl-C stops them)", flush=True)
        while not received:
            dead = [i for i, p in enumerate(servers.procs) if p.poll() is not None]
            if dead:
                raise BackendError(
                    f"judge server(s) {dead} exited; logs: " + ", ".join(str(servers.log_paths[i]) for i in dead)
                )
            time.sleep(0.25)  # (a stop signal is seen within this)
    except KeyboardInterrupt:
        pass
    finally:
        launched = bool(servers.procs)  # none when refused before any start (a taken port, a bad --host)
        servers.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if launched:
            print("judge servers stopped", flush=True)
    return 0


def cmd_reward_server(args: argparse.Namespace) -> int:
    """Serve the judge as an OpenRLHF remote reward model: bad settings or a failed start-up check exit 2 first."""
    from prom_reward.integrations.openrlhf_server import ServerHealth, serve_reward
    from prom_reward.rewards.reward import PrometheusReward
    from prom_reward.rewards.startup import check_judge

    settings = reward_server_settings(args)
    if not settings.server and not settings.model:
        raise ConfigError(
            "reward-server: no judge given; fix: give --server URL (or PROM_REWARD_SERVER) or --model M "
            "(in-process vLLM)"
        )
    if not math.isfinite(args.max_body_mb) or args.max_body_mb <= 0:  # 0, a negative or NaN: every request refused
        raise ConfigError(
            f"--max-body-mb: expected a number of megabytes > 0, got {args.max_body_mb!r}; fix: give --max-body-mb a "
            "number > 0 (default 8)"
        )
    check_port_free(args.host, args.port)  # a taken port or a bad --host fails before the judge is built
    spec = reward_server_judge(args, settings)
    token = _token(args)
    reward = PrometheusReward(spec, settings.reward)
    health = ServerHealth(reward.health, settings.degraded_failure_share)
    check_judge(
        reward.judge_server(),
        reward=reward,
        canary_timeout=settings.request_timeout,
        on_misconfigured=health.misconfigured,
    )
    reward.judge  # noqa: B018 - build the judge now: an in-process model that cannot load fails before serving
    serve_reward(
        reward,
        settings,
        host=args.host,
        port=args.port,
        token=token,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        health=health,
    )
    return 0


def reward_server_settings(args: argparse.Namespace, env: Any = None) -> Any:
    """The ``RewardSettings`` of reward-server: the flags given > ``env`` (None: ``os.environ``) > ``--config``."""
    from prom_reward.integrations.settings import RewardSettings, setting_names

    explicit = {name: getattr(args, name, None) for name in setting_names() if name != "judge"}
    return RewardSettings.load({**explicit, "config_file": args.config_file}, env)


def reward_server_judge(args: argparse.Namespace, settings: Any) -> JudgeSpec:
    """The judge of reward-server: its judge flags that are not settings (``--temperature`` ...) over the
    settings' judge (``RewardSettings.judge_spec``)."""
    from prom_reward.integrations.settings import setting_names

    flags = [d.name for d in declared(JudgeSpec) if d.name not in setting_names()]
    return judge_spec(args, settings.judge_spec(), flags)


def _token(args: argparse.Namespace) -> str | None:
    """The server's token: ``--token-file``, else ``$PROM_REWARD_TOKEN``, else ``--token`` (warned: ``ps`` shows it)."""
    from prom_reward.declared import read_text

    if args.token_file:
        token = read_text(args.token_file, "give the file that holds the token as plain text", "token_file").strip()
        if not token:
            raise ConfigError(f"{args.token_file!r} is empty; fix: write the token in it", "token_file")
        return token
    if os.environ.get("PROM_REWARD_TOKEN", "").strip():
        return os.environ["PROM_REWARD_TOKEN"].strip()
    if args.token is not None and not args.token.strip():
        raise ConfigError("empty (every request would be refused); fix: give the token, or leave --token out", "token")
    if args.token:
        print(
            "prom-reward reward-server: warning: --token is visible to every user in `ps` and in the shell history; "
            "pass it with --token-file FILE or PROM_REWARD_TOKEN",
            file=sys.stderr,
        )
    return args.token


def _add_reward_server_parser(sub: Any) -> None:
    from prom_reward.integrations.settings import ENV_PREFIX, flag_name, settings_fields

    s = sub.add_parser(
        "reward-server",
        help="serve the judge as an OpenRLHF remote reward model (HTTP)",
        description="Settings: flags > PROM_REWARD_* environment > --config YAML > defaults (docs/openrlhf.md).",
    )
    add_judge_options(s, truncate=False)  # the reward's over_context setting says what an over-long response gets
    s.set_defaults(**{d.name: None for d in declared(JudgeSpec)})  # given or not, over the settings' judge
    for name, _, d in settings_fields():
        if not flag_name(name) or flag_name(name) in s._option_string_actions:  # no flag, or a judge option's
            continue
        help_text = f"{d.rules.help} [{ENV_PREFIX}{name.upper()}]".replace("%", "%%")
        s.add_argument(flag_name(name), dest=name, action="append" if name == "strip" else "store", help=help_text)
    s.add_argument(
        "--config", dest="config_file", help="YAML file of settings (keys: the setting names) [PROM_REWARD_CONFIG]"
    )
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=5000, help="port of the reward server (default 5000)")
    s.add_argument(
        "--token-file",
        help="file holding the token requests must carry (?token=TOKEN in the URL or "
        "'Authorization: Bearer TOKEN'); or set PROM_REWARD_TOKEN",
    )
    s.add_argument("--token", help="the token itself (visible in `ps`: prefer --token-file or PROM_REWARD_TOKEN)")
    s.add_argument("--max-body-mb", type=float, default=8.0, help="larger request bodies get 413")
    s.set_defaults(func=cmd_reward_server)


def cmd_openrlhf_func_path(args: argparse.Namespace) -> int:
    """Print the path of the ``reward_func`` file for OpenRLHF's ``--reward.remote_url``."""
    from prom_reward.integrations.openrlhf_func import reward_func_path

    print(reward_func_path())
    return 0
