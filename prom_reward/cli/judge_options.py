"""The judge options every judging subcommand shares (``--model``, ``--server``, sampling ...), and the
``PrometheusJudge`` they describe; the outage policy's flags of the commands that judge a file (``grade``,
``compare``, ``pairs``, ``probe``: ``--outage-budget-s`` ..., the reward server's setting names).

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser(); add_judge_options(p)
    >>> judge_kwargs(p.parse_args(["--server", "http://127.0.0.1:8000/v1"]))["backend"]
    'openai'
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from prom_reward.core.sampler import FORCE_POLICIES
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.format.judge_format import JUDGE_FORMATS, get_judge_format

if TYPE_CHECKING:
    from prom_reward.rewards.outage import OutagePolicy


def judge_format_name(value: str) -> str:
    """``--format``'s value: a registered judge format's name, or the path of a YAML format file, checked here
    (argparse exits 2 listing the valid names, or naming the file's bad key)."""
    try:
        fmt = get_judge_format(value)
    except PromRewardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return fmt.name if fmt.name in JUDGE_FORMATS else value  # a file is loaded again (once) where the judge is built


def add_judge_options(g: argparse.ArgumentParser, *, truncate: bool = True) -> None:
    """The options ``judge_kwargs`` reads (shared by every subcommand that judges); ``truncate``: with
    ``--truncate`` (reward-server has the ``over_context`` setting instead)."""
    g.add_argument("--model", default=None, help="hub id, local folder, or preset (e.g. prometheus-7b-v2.0)")
    g.add_argument("--server", action="append", help="OpenAI-compatible base URL (repeatable)")
    g.add_argument(
        "--backend",
        default="vllm",
        choices=["vllm", "transformers"],
        help="in-process engine for --model (default vllm)",
    )
    g.add_argument(
        "--endpoint",
        default="chat",
        choices=["chat", "completions"],
        help="--server endpoint: chat (/chat/completions) or completions (/completions; needed for --wire inst)",
    )
    g.add_argument(
        "--wire",
        choices=["chat", "inst", "raw"],
        help="prompt wrapping: chat template, literal Mistral [INST], or raw text (default: the preset's, else chat)",
    )
    g.add_argument(
        "--format",
        type=judge_format_name,
        help=f"judge format: the prompts and verdicts of the judge model ({', '.join(JUDGE_FORMATS)}, or a .yaml "
        "file; docs/formats.md); default: the preset's, else prometheus2",
    )
    g.add_argument("--num-samples", type=int, default=1, help="samples per item; the score is their mean (default 1)")
    g.add_argument("--max-tokens", type=int, help="judge output tokens (default: the preset's, else 1024)")
    g.add_argument("--temperature", type=float, help="sampling temperature (default 1.0, the papers')")
    g.add_argument("--expected", action="store_true", help="request logprobs; write P(1..5) and the expected score")
    g.add_argument(
        "--force-verdict",
        choices=FORCE_POLICIES,
        help="when to read a verdict the judge did not write from its next-token distribution (counted): "
        "cut (outputs cut at --max-tokens), always (every output without a verdict) or never; default: the "
        "preset's policy, else cut",
    )
    if truncate:
        g.add_argument("--truncate", action="store_true", help="shorten over-long responses instead of failing")
    g.add_argument("--max-model-len", type=int, help="vLLM: the engine's context length (default: the model's)")
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM: GPUs per engine (default 1)")
    g.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM: no CUDA graphs / compilation: faster start, slower generation (default: eager on vLLM's CPU "
        "build, compiled on a GPU)",
    )
    g.add_argument(
        "--gpu-memory-utilization", type=float, help="vLLM: share of the GPU the in-process engine takes (default 0.9)"
    )


def add_store_options(g: argparse.ArgumentParser) -> None:
    """``--store`` and ``--store-timeout`` of every command that judges a file (the jobs, the probe)."""
    g.add_argument(
        "--store", help="SQLite judgment store: saves every judge result; a re-run recomputes nothing stored"
    )
    g.add_argument(
        "--store-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for a --store that another process holds locked (default 30)",
    )


def open_store(args: argparse.Namespace) -> dict[str, Any]:
    """``{"store": JudgmentStore}`` of ``--store``, opened (checked: an SQLite store, not locked) before any input
    is read; ``{}`` without one."""
    if not args.store:
        return {}
    from prom_reward.backends.store import JudgmentStore

    return {"store": JudgmentStore(args.store, timeout=args.store_timeout)}


def judge_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``PrometheusJudge`` keyword arguments from the judge options (what ``--ray`` sends to each replica)."""
    sampling: dict[str, Any] = {}
    if args.max_tokens is not None:
        sampling["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    common: dict[str, Any] = dict(
        sampling=sampling or None,
        num_samples=args.num_samples,
        expected_score=args.expected,
        truncate_response=args.truncate,
    )
    if args.force_verdict is not None:
        common["force_verdict"] = args.force_verdict
    if args.format is not None:
        common["format"] = args.format
    if args.server:
        return dict(
            model=args.model,
            backend="openai",
            base_url=args.server,
            endpoint=args.endpoint,
            wire=args.wire or "chat",
            **common,
        )
    engine: dict[str, Any] = {}
    if args.wire:
        engine["wire"] = args.wire
    if args.max_model_len:
        engine["max_model_len"] = args.max_model_len
    if args.backend == "vllm":
        if args.enforce_eager is not None:
            engine["enforce_eager"] = args.enforce_eager
        engine["tensor_parallel_size"] = args.tensor_parallel_size
        if args.gpu_memory_utilization is not None:
            engine["gpu_memory_utilization"] = args.gpu_memory_utilization
    return dict(model=args.model, backend=args.backend, **common, **engine)


def build_judge(args: argparse.Namespace) -> Any:
    """The ``PrometheusJudge`` of the judge and store options (a ``--store`` keys its judgments by the model the
    server serves, asked once when ``--model`` is not given: ``backends.cached``)."""
    from prom_reward.core.judge import PrometheusJudge

    return PrometheusJudge(**{**judge_kwargs(args), **open_store(args)})


def add_outage_options(g: argparse.ArgumentParser, default: OutagePolicy, fail_means: str) -> None:
    """The flag of each ``OutagePolicy`` setting (``outage_budget_s`` -> ``--outage-budget-s``, the reward server's
    names: ``integrations.settings``), over ``default``; ``fail_means``: what ``--outage-on-exhausted fail`` does in
    this command. Help and choices are the setting's declaration (``prom_reward.declared``)."""
    from prom_reward.declared import declared
    from prom_reward.integrations.settings import OUTAGE_PREFIX
    from prom_reward.integrations.settings_sources import flag_name

    for d in declared(type(default)):
        choices = d.rules.choices or None
        g.add_argument(
            flag_name(OUTAGE_PREFIX + d.name),
            dest=OUTAGE_PREFIX + d.name,
            type=str if choices else float,
            choices=choices,
            metavar=None if choices else "SECONDS",
            help=f"{d.rules.help} (default {getattr(default, d.name)}{f'; here fail {fail_means}' * bool(choices)})",
        )


def outage_policy(args: argparse.Namespace, default: OutagePolicy) -> OutagePolicy:
    """The ``OutagePolicy`` of the ``--outage-*`` flags given, over ``default``; a bad value names its flag."""
    from prom_reward.integrations.settings import OUTAGE_PREFIX
    from prom_reward.integrations.settings_sources import flag_name

    fields = dataclasses.fields(default)
    given = {f.name: v for f in fields if (v := getattr(args, OUTAGE_PREFIX + f.name)) is not None}
    try:
        return dataclasses.replace(default, **given)
    except ConfigError as e:
        raise e.said_as(flag_name(OUTAGE_PREFIX + e.setting)) from None
