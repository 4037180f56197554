"""Shared plumbing of the examples: the policy, the judge, the prompts, a summary line.

``--smoke`` builds a tiny random Llama policy (SmolLM2's tokenizer) and judges with
SmolLM2-135M-Instruct on the embedded CPU vLLM engine with forced verdicts, so a run
finishes in minutes on 2 cores. Without it, ``--policy`` and ``--judge`` (or
``--judge-server`` URLs of dedicated vLLM servers) name real models.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

PROMPTS = [
    "Explain in one sentence why the sky is blue.",
    "Give one tip for writing clear emails.",
    "What is the capital of Japan?",
    "Suggest a name for a friendly robot.",
    "Describe the taste of lemon in five words.",
    "Why should code have tests? Answer briefly.",
    "Name two renewable energy sources.",
    "How many legs does a spider have?",
]


def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--smoke", action="store_true", help="tiny policy + SmolLM2 judge on CPU, 2 steps")
    ap.add_argument("--policy", help="policy model (hub id or folder); default in --smoke: a tiny random Llama")
    ap.add_argument("--judge", default="prometheus-7b-v2.0", help="judge preset, hub id or folder")
    ap.add_argument("--judge-server", action="append", help="OpenAI-compatible judge URL(s) (repeatable)")
    ap.add_argument("--rubric", default="helpfulness")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--output-dir", default=None)


def smoke_env() -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def policy_path(args: argparse.Namespace) -> str:
    """The policy to train: ``--policy``, or in ``--smoke`` a tiny random Llama built on the spot."""
    if args.policy:
        return str(args.policy)
    if not args.smoke:
        raise SystemExit("give --policy MODEL (or --smoke for the CPU demo)")
    from benchmarks.tiny_llama import build_tiny_llama
    from prom_reward.local.models import ensure_smollm2

    out = Path(tempfile.gettempdir()) / "prom_reward_examples" / "tiny-policy"
    return str(build_tiny_llama(out, tokenizer_from=ensure_smollm2(), chat_template="original"))


def make_judge(args: argparse.Namespace) -> Any:
    """The judge: dedicated servers, the smoke judge, or an in-process vLLM engine."""
    from prom_reward import PrometheusJudge
    from prom_reward.core.presets import PRESETS

    smoke = {"sampling": {"max_tokens": 24}} if args.smoke else {}
    if args.judge_server:  # the server owns the weights; the preset still gives the wire format and options
        preset = "smollm2-135m-instruct" if args.smoke else args.judge
        return PrometheusJudge(
            backend="openai", base_url=args.judge_server, preset=preset if preset in PRESETS else None, **smoke
        )
    if args.smoke:
        return PrometheusJudge("smollm2-135m-instruct", max_model_len=4096, enforce_eager=True, **smoke)
    return PrometheusJudge(args.judge)


def prompts_dataset(args: argparse.Namespace, repeat: int = 1) -> Any:
    from datasets import Dataset

    prompts = PROMPTS * repeat
    return Dataset.from_dict({"prompt": prompts, "rubric": [args.rubric] * len(prompts)})


def summary(name: str, trainer: Any, reward_key: str) -> dict[str, Any]:
    """Print (and return) one JSON line with what the run logged."""
    history = trainer.state.log_history
    rewards = [h[reward_key] for h in history if reward_key in h]
    losses = [h["loss"] for h in history if "loss" in h]
    line = {
        "example": name,
        "steps": trainer.state.global_step,
        "rewards": rewards,
        "losses": losses,
        "finite": all(math.isfinite(x) for x in rewards + losses),
    }
    print("SUMMARY " + json.dumps(line), flush=True)
    return line
