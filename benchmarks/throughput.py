"""Judge throughput through ``prom_reward`` vs. raw ``vllm.LLM.generate``, same engine, same run.

Both paths use one in-process vLLM engine, the same judge prompts (rendered by the library once,
up front, for the raw path: a raw user would have to do that work too, so it is not timed there) and
the same ``SamplingParams``. The library path is ``PrometheusJudge.grade`` with no retries and no
forcing, so it sends exactly one request per item; its time includes validation, rendering,
tokenisation, parsing and result building. The two paths alternate ``repeat`` times (best run kept)
after one warm-up batch, each starting with an empty prefix cache (else the second path would reuse
the first one's cached prompts). Reported per path: judgments/s, prompt and output tokens/s; and the ratio
library/raw.

``python -m benchmarks.throughput --model tiny|smollm2-135m-instruct|FOLDER [--n 32] [--max-tokens 64]``
(runs unchanged on a GPU machine with vLLM; pass a hub id or folder of a real judge there).

Example (needs vLLM and a model):
    >>> engine = VLLMEngine("prometheus-eval/prometheus-7b-v2.0", max_model_len=8192)  # doctest: +SKIP
    >>> measure_throughput(engine, items(32), SamplingConfig(max_tokens=256))["ratio"]  # doctest: +SKIP
    0.97
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.vllm_engine import VLLMEngine
from prom_reward.core.judge import PrometheusJudge
from prom_reward.format.render import render_absolute
from prom_reward.format.templates import ABS_SYSTEM_PROMPT

Item = tuple[str, str, str, "str | None"]  # instruction, response, rubric text, reference answer


def items(n: int, bench: str = "vicuna", seed: int = 0) -> list[Item]:
    """``n`` (instruction, response, rubric, reference) items from an absolute benchmark."""
    from .loaders import AbsoluteExample, load_bench, subset

    _, ex = load_bench(bench)
    chosen = [e for e in subset(ex, n, seed) if isinstance(e, AbsoluteExample)]
    return [(e.instruction, e.response, e.rubric, e.reference_answer) for e in chosen]


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def measure_throughput(
    engine: VLLMEngine, batch: Sequence[Item], sampling: SamplingConfig, repeat: int = 2
) -> dict[str, Any]:
    """Time both paths on ``batch``; returns per-path figures, the ratio and the token counts."""
    judge = PrometheusJudge(backend=engine, sampling=sampling, max_retries=0, force_verdict="never")
    ins, res, rubs, refs = (list(x) for x in zip(*batch, strict=True))
    reqs = [GenerationRequest(ABS_SYSTEM_PROMPT, render_absolute(i, r, rb, rf), sampling) for i, r, rb, rf in batch]
    from vllm import SamplingParams

    from prom_reward.backends.vllm_options import sampling_kwargs

    prompts = [{"prompt_token_ids": engine._ids(r)} for r in reqs]
    params = SamplingParams(**sampling_kwargs(sampling, 1, per_request_seed=not engine._cpu))  # the engine's own
    engine.llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up

    def reset_cache() -> None:  # every timed run starts cold: judge prompts are new in real use
        if hasattr(engine.llm, "reset_prefix_cache"):
            engine.llm.reset_prefix_cache()

    def raw() -> tuple[float, int, int]:
        reset_cache()
        t = time.perf_counter()
        outs = engine.llm.generate(prompts, params, use_tqdm=False)
        dt = time.perf_counter() - t
        return dt, sum(len(o.prompt_token_ids) for o in outs), sum(len(c.token_ids) for o in outs for c in o.outputs)

    def lib() -> tuple[float, int, int]:
        reset_cache()
        t = time.perf_counter()
        grades = judge.grade(ins, res, rubs, refs)
        dt = time.perf_counter() - t
        return dt, sum(g.prompt_tokens for g in grades), sum(g.completion_tokens for g in grades)

    runs: dict[str, list[tuple[float, int, int]]] = {"raw_vllm": [], "prom_reward": []}
    for _ in range(repeat):
        runs["raw_vllm"].append(raw())
        runs["prom_reward"].append(lib())
    out: dict[str, Any] = {"n": len(batch), "repeat": repeat, "sampling": sampling.to_dict()}
    for name, rs in runs.items():
        dt, pt, ct = min(rs, key=lambda r: r[0])
        out[name] = {
            "seconds": round(dt, 4),
            "judgments_per_s": _rate(len(batch), dt),
            "prompt_tokens": pt,
            "output_tokens": ct,
            "prompt_tokens_per_s": _rate(pt, dt),
            "output_tokens_per_s": _rate(ct, dt),
            "all_seconds": [round(r[0], 4) for r in rs],
        }
    out["ratio"] = out["prom_reward"]["judgments_per_s"] / out["raw_vllm"]["judgments_per_s"]
    out["judge_stats"] = dataclasses.asdict(judge.stats)
    return out


def _engine(model: str, seed: int, max_model_len: int) -> VLLMEngine:
    from prom_reward.backends.vllm_engine import _is_cpu_platform
    from prom_reward.core.presets import find_preset_for_model, resolve_model_path

    opts: dict[str, Any] = {"seed": seed, "max_model_len": max_model_len, "enforce_eager": _is_cpu_platform()}
    if model == "tiny":
        import tempfile
        from pathlib import Path

        from benchmarks.tiny_llama import build_tiny_llama
        from prom_reward.local.models import ensure_smollm2

        model = str(build_tiny_llama(Path(tempfile.mkdtemp(prefix="tiny-llama-")), tokenizer_from=ensure_smollm2()))
    else:
        p = find_preset_for_model(model)
        if p is not None:
            model = resolve_model_path(p.model)
            opts = {**{k: v for k, v in p.engine.items() if k != "max_model_len"}, **opts, "wire": p.wire}
    return VLLMEngine(model, **opts)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .report import emit, versions

    ap = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny", help="tiny (random Llama), a preset name, hub id or folder")
    ap.add_argument("--n", type=int, default=32, help="judgments per batch")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--out", help="write the JSON record here too")
    args = ap.parse_args(argv)
    engine = _engine(args.model, args.seed, args.max_model_len)
    try:
        sampling = SamplingConfig(max_tokens=args.max_tokens, temperature=args.temperature)
        rec = {
            "benchmark": "throughput",
            "model": args.model,
            **measure_throughput(engine, items(args.n, seed=args.seed), sampling, args.repeat),
            "versions": versions(),
        }
    finally:
        engine.close()
    emit(rec, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
