"""``prom-reward serve`` (dedicated vLLM judge servers), ``reward-server`` (the judge as OpenRLHF's remote
reward model) and ``openrlhf-func-path``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from prom_reward.backends.servers import JudgeServers, ServeConfig
from prom_reward.backends.vllm_options import DEFAULT_GPU_MEMORY_UTILIZATION, TOKENIZER_MODES, VLLMOptions
from prom_reward.cli.judge_options import add_judge_options, build_judge
from prom_reward.errors import BackendError, ConfigError


def add_serve_parser(sub: Any) -> None:
    """The ``prom-reward serve`` subcommand."""
    p = sub.add_parser("serve", help="launch dedicated vLLM judge servers and keep them up until Ctrl-C")
    p.add_argument("--model", required=True, help="hub id, folder or preset (e.g. prometheus-7b-v2.0)")
    p.add_argument("--gpus", default="", help="comma-separated GPU ids, e.g. 4,5,6,7 (none: one CPU replica)")
    p.add_argument("--replicas", default="auto", help="number of servers, or auto (GPUs / tensor-parallel-size)")
    p.add_argument("--port", type=int, default=8100, help="port of the first replica (replica i: port + i)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--log-dir", default="judge-logs")
    p.add_argument("--startup-timeout", type=float, default=1800.0)
    e = p.add_argument_group("engine (prom_reward.backends.vllm_options.VLLMOptions; a preset's values, "
                             "then vLLM's defaults where not given)")
    e.add_argument("--tensor-parallel-size", type=int, help="GPUs per replica (default 1)")
    e.add_argument("--max-model-len", type=int)
    e.add_argument("--gpu-memory-utilization", type=float,
                   help=f"share of each GPU a replica takes (default {DEFAULT_GPU_MEMORY_UTILIZATION}; "
                        "always passed to vLLM)")
    e.add_argument("--no-prefix-caching", action="store_true")
    e.add_argument("--dtype")
    e.add_argument("--enforce-eager", action="store_true")
    e.add_argument("--seed", type=int, help="engine seed (default 0)")
    e.add_argument("--tokenizer-mode", choices=TOKENIZER_MODES,
                   help="hf (default: as prom-reward renders in process) or mistral")
    p.set_defaults(func=cmd_serve)


def serve_config(args: Any) -> ServeConfig:
    """The ``ServeConfig`` of ``prom-reward serve``'s options: a preset's engine options (e.g. dtype and
    max_model_len of ``prometheus-7b-v2.0``) under the flags given."""
    from prom_reward.core.presets import find_preset_for_model

    gpus = tuple(int(g) for g in args.gpus.split(",") if g.strip()) if args.gpus else ()
    if args.replicas == "auto":
        replicas = None
    elif str(args.replicas).isdigit():
        replicas = int(args.replicas)
    else:
        raise ConfigError(f"--replicas: expected a number or 'auto', got {args.replicas!r}")
    preset = find_preset_for_model(args.model)
    given = {name: getattr(args, name) for name in ("tensor_parallel_size", "max_model_len", "gpu_memory_utilization",
                                                    "dtype", "seed", "tokenizer_mode")}
    settings = {**(preset.engine if preset else {}), **{k: v for k, v in given.items() if v is not None}}
    if args.no_prefix_caching:
        settings["enable_prefix_caching"] = False
    if args.enforce_eager:
        settings["enforce_eager"] = True
    return ServeConfig(model=args.model, engine=VLLMOptions.from_settings(settings), gpus=gpus, replicas=replicas,
                       port=args.port, host=args.host, log_dir=args.log_dir, startup_timeout=args.startup_timeout)


def cmd_serve(args: Any) -> int:
    cfg = serve_config(args)
    servers = JudgeServers(cfg)
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    # Ctrl-C and SIGTERM both stop the servers. SIGINT gets an explicit handler: a process started in
    # the background by a non-interactive shell inherits SIGINT *ignored*, and then Ctrl-C (or a
    # supervisor's SIGINT) would never reach the default KeyboardInterrupt.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        urls = servers.start()
        print("judge servers ready: " + " ".join(urls), flush=True)
        print("use: --server " + " --server ".join(urls) + "   (Ctrl-C stops them)", flush=True)
        while not stop["now"]:
            dead = [i for i, p in enumerate(servers.procs) if p.poll() is not None]
            if dead:
                raise BackendError(f"judge server(s) {dead} exited; logs in {cfg.log_dir}/")
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        servers.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("judge servers stopped", flush=True)
    return 0


def cmd_reward_server(args: argparse.Namespace) -> int:
    """Serve the judge as an OpenRLHF remote reward model (``prom_reward.integrations.openrlhf_server``)."""
    import os

    from prom_reward.integrations.openrlhf_server import serve_reward
    from prom_reward.rewards.reward import PrometheusReward

    if not args.model and not args.server:
        print("prom-reward reward-server: give --model M (in-process vLLM) or --server URL", file=sys.stderr)
        return 2
    if args.failure_reward is None:
        print("prom-reward reward-server: give --failure-reward NUMBER|min. OpenRLHF needs a number for every "
              "sample, also where the judge gave no verdict; choose what such a sample is worth: a number on your "
              "reward scale (e.g. 1 = the lowest raw grade, 0 with --normalize unit) or 'min' (the lowest reward of "
              "the configured scale). Failed samples are flagged judge_failed=1 and counted either way.",
              file=sys.stderr)
        return 2
    if args.mode == "pairwise_group" and args.group_size is None:
        print("prom-reward reward-server: --mode pairwise_group needs --group-size N, the number of samples per "
              "prompt (OpenRLHF --rollout.n_samples_per_prompt): OpenRLHF sends them one request each and the "
              "server waits for the whole group before comparing", file=sys.stderr)
        return 2
    reward = PrometheusReward(build_judge(args), rubric=args.rubric, mode=args.mode, score=args.score,
                              normalize=args.normalize)
    serve_reward(reward, host=args.host, port=args.port, token=args.token or os.environ.get("PROM_REWARD_TOKEN"),
                 failure_reward=args.failure_reward, max_body_bytes=int(args.max_body_mb * 1024 * 1024),
                 strip=tuple(args.strip or ()), batch_window_ms=args.batch_window_ms,
                 max_batch_size=args.max_batch_size, request_timeout=args.request_timeout,
                 group_size=args.group_size, group_wait_s=args.group_wait_s)
    return 0


def _add_reward_server_parser(sub: Any) -> None:
    s = sub.add_parser("reward-server", help="serve the judge as an OpenRLHF remote reward model (HTTP)")
    s.add_argument("--rubric", default="helpfulness", help="built-in name or a JSON/YAML rubric file")
    s.add_argument("--mode", default="absolute", choices=["absolute", "pairwise_group"])
    s.add_argument("--score", default="sample", choices=["sample", "mean", "expected"])
    s.add_argument("--normalize", choices=["unit", "symmetric"])
    add_judge_options(s)
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=5000)
    s.add_argument("--token", help="require ?token=TOKEN in the URL or 'Authorization: Bearer TOKEN' "
                                   "(or set PROM_REWARD_TOKEN)")
    s.add_argument("--failure-reward", help="required: reward sent where the judge failed, a number or 'min'")
    s.add_argument("--batch-window-ms", type=float, default=50.0,
                   help="how long a sample waits for others before its batch goes to the judge (default 50)")
    s.add_argument("--max-batch-size", type=int, default=256, help="samples per judge call at most (default 256)")
    s.add_argument("--request-timeout", type=float, default=170.0,
                   help="answer a request with its samples failed after this many seconds (default 170, "
                        "under OpenRLHF's 180 s client timeout)")
    s.add_argument("--group-size", type=int, help="--mode pairwise_group: samples per prompt "
                                                  "(= OpenRLHF --rollout.n_samples_per_prompt)")
    s.add_argument("--group-wait-s", type=float, default=60.0,
                   help="pairwise_group: judge a group still short after this many seconds (default 60)")
    s.add_argument("--max-body-mb", type=float, default=8.0, help="larger request bodies get 413")
    s.add_argument("--strip", action="append", help="end-of-text string removed from responses (repeatable)")
    s.set_defaults(func=cmd_reward_server)


def cmd_openrlhf_func_path(args: argparse.Namespace) -> int:
    """Print the path of the ``reward_func`` file for OpenRLHF's ``--reward.remote_url``."""
    from prom_reward.integrations.openrlhf_func import reward_func_path

    print(reward_func_path())
    return 0


def add_server_parsers(sub: Any) -> None:
    """The ``serve``, ``reward-server`` and ``openrlhf-func-path`` subcommands."""
    add_serve_parser(sub)
    _add_reward_server_parser(sub)
    f = sub.add_parser("openrlhf-func-path", help="print the reward_func file for OpenRLHF --reward.remote_url")
    f.set_defaults(func=cmd_openrlhf_func_path)
