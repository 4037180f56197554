"""The pocket judge end to end in one resumable command: train, merge, evaluate, ship.

Stages, each skipped when its output is already complete (an interrupted run picks up where it stopped):

1. ``absolute``: SFT of the absolute expert (``--absolute-config``) into ``OUT/absolute``.
2. ``relative``: SFT of the relative expert (``--relative-config``) into ``OUT/relative``.
3. ``merge``: the two experts merged as LoRA deltas, linear (0.5 / 0.5) into ``OUT/merged-linear`` and
   DARE-linear (0.5 / 0.5, density 0.7, seed 0) into ``OUT/merged-dare_linear``, saved in float32.
4. ``evaluate``: base, absolute, relative, merged-linear, merged-dare_linear with ``train_judge.evaluate``
   (paper sampling) into ``OUT/eval_<name>.json``; ``OUT/table.md`` holds the table.
5. ``ship``: the chosen judge (``--ship auto``: among the judges whose absolute and pairwise
   parse-failure rates are both at most ``--max-parse-failure``, the best absolute Pearson + pairwise
   accuracy without ties; or a name) in the form
   ``train_judge/assets/pocket_judge/`` takes, in ``OUT/shipped``: its expert adapters (bf16) plus
   ``merge.yaml`` (for a merge, the two experts and its method; for an expert, a one-model ``linear``
   merge, which is the base plus its update, exactly). That folder is then rebuilt onto
   the base exactly as ``make setup`` does and evaluated again as ``shipped``.

Shell (the run behind the shipped pocket judge, one GPU without vLLM)::

    python -m train_judge.pocket_pipeline --out outputs/pocket --backend transformers --device cuda \\
        --max-tokens 1024 --num-samples 3 --pairs 192

On CPU, a subset: ``--absolute-config train_judge/configs/pocket_absolute.yaml --relative-config
train_judge/configs/pocket_relative.yaml --max-tokens 256 --pairs 40`` (the CPU configs hold the subsets).

Example (the choice rule alone):
    >>> good = {"parse_failure_rate": 0.1}
    >>> pick_judge({"absolute": {"absolute": {"pearson": 0.4, **good},
    ...                          "pairwise": {"acc_wo_tie": 0.0, "parse_failure_rate": 0.99}},
    ...             "merged-linear": {"absolute": {"pearson": 0.2, **good}, "pairwise": {"acc_wo_tie": 0.3, **good}}},
    ...            0.25)
    'merged-linear'
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prom_reward.cli.voice import PlainHelpFormatter
from prom_reward.errors import ConfigError, PromRewardError

log = logging.getLogger("train_judge.pocket_pipeline")

CONFIGS = Path(__file__).parent / "configs"
EXPERTS = ("absolute", "relative")
MERGES = {"linear": {}, "dare_linear": {"density": 0.7}}
CANDIDATES = ("absolute", "relative", "merged-linear", "merged-dare_linear")


def pick_judge(results: Mapping[str, Mapping[str, Any]], max_parse_failure: float) -> str:
    """The judge to ship: it must do both of the library's tasks, i.e. its absolute *and* pairwise
    parse-failure rates are at most ``max_parse_failure``; among those, the best sum of absolute Pearson
    and pairwise accuracy without ties. ConfigError (listing every rate) when none qualifies."""
    ok = {}
    for name, r in results.items():
        a, p = r.get("absolute") or {}, r.get("pairwise") or {}
        pearson, acc = a.get("pearson"), p.get("acc_wo_tie")
        if (
            pearson is not None
            and acc is not None
            and not math.isnan(pearson)
            and not math.isnan(acc)
            and a.get("parse_failure_rate", 1.0) <= max_parse_failure
            and p.get("parse_failure_rate", 1.0) <= max_parse_failure
        ):
            ok[name] = pearson + acc
    if not ok:
        rates = {
            n: (
                (r.get("absolute") or {}).get("parse_failure_rate"),
                (r.get("pairwise") or {}).get("parse_failure_rate"),
            )
            for n, r in results.items()
        }
        raise ConfigError(
            f"no judge writes parseable absolute and pairwise verdicts often enough (absolute, "
            f"pairwise parse-failure rates {rates}, allowed <= {max_parse_failure}); train longer "
            "or pass --ship NAME"
        )
    return max(ok, key=lambda n: ok[n])


def train_expert(task: str, config: Path, out: Path, *, model: str | None, max_steps: int | None) -> Path:
    from .config import load_config
    from .sft import RUN_FILE, train

    if (out / RUN_FILE).is_file() and (out / "adapter_model.safetensors").is_file():
        log.info("%s expert: done already (%s)", task, out)
        return out
    cfg = load_config(config, output_dir=str(out), model=model, max_steps=max_steps)
    if cfg.task != task:
        raise ConfigError(f"{config} trains a {cfg.task} expert, expected a {task} one")
    if cfg.lora is None:
        raise ConfigError(f"{config}: the pocket pipeline merges LoRA experts; add a lora: section")
    return train(cfg)


def merge_experts(out: Path, base: str) -> dict[str, Path]:
    from .merge.config import config_from_dict
    from .merge.engine import run_merge

    made = {}
    for method, params in MERGES.items():
        target = out / f"merged-{method}"
        cfg = config_from_dict(
            {
                "method": method,
                "base_model": base,
                "dtype": "float32",
                "seed": 0,
                "models": [{"path": str(out / e), "weight": 0.5} for e in EXPERTS],
                "parameters": dict(params),
                "output": str(target),
            }
        )
        run_merge(cfg)  # resumes / skips a finished merge itself
        made[method] = target
    return made


def ship_judge(out: Path, chosen: str, dst: Path) -> dict[str, Any]:
    """Write ``chosen`` into ``dst`` in the shipped form (see stage 5); returns its ``judge.json``."""
    import shutil

    import yaml
    from safetensors.torch import load_file, save_file

    from train_judge.pocket_judge import MERGE_FILE

    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    experts = (chosen,) if chosen in EXPERTS else EXPERTS
    for e in experts:
        (dst / e).mkdir()
        shutil.copy2(out / e / "adapter_config.json", dst / e / "adapter_config.json")
        weights = load_file(str(out / e / "adapter_model.safetensors"))
        save_file({k: v.bfloat16() for k, v in weights.items()}, str(dst / e / "adapter_model.safetensors"))
    method = "linear" if chosen in EXPERTS else chosen.removeprefix("merged-")
    spec = {
        "method": method,
        "models": [{"path": e, "weight": 1.0 / len(experts)} for e in experts],
        "parameters": dict(MERGES[method]),
        "seed": 0,
        "dtype": "bfloat16",
    }  # served as bf16
    (dst / MERGE_FILE).write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    meta = {"form": "merge", **spec, "judge": chosen}
    (dst / "judge.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def run(args: argparse.Namespace) -> dict[str, Any]:
    from prom_reward.core.presets import resolve_model_path

    from . import evaluate as ev

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = resolve_model_path(args.model)
    timings: dict[str, float] = {}
    for task, config in (("absolute", args.absolute_config), ("relative", args.relative_config)):
        t0 = time.perf_counter()
        train_expert(task, Path(config), out / task, model=args.model, max_steps=args.max_steps)
        timings[f"train_{task}"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    merge_experts(out, base)
    timings["merge"] = round(time.perf_counter() - t0, 1)

    def judge_folder(name: str) -> str:
        if name == "base":
            return base
        if name in EXPERTS:
            return str(ev.merge_adapter(args.model, out / name, out / f"{name}-merged"))
        return str(out / name)

    def evaluate(name: str, folder: str) -> dict[str, Any]:
        path = out / f"eval_{name}.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        t0 = time.perf_counter()
        res = ev.evaluate(folder, **{k: getattr(args, k) for k in ev.EVALUATION_FLAGS})
        res["name"] = name
        path.write_text(json.dumps(res, indent=1), encoding="utf-8")
        timings[f"eval_{name}"] = round(time.perf_counter() - t0, 1)
        log.info("%s: %s", name, ev.results_table([res]).splitlines()[-1])
        return res

    results = {name: evaluate(name, judge_folder(name)) for name in ("base", *CANDIDATES)}
    chosen = (
        args.ship if args.ship != "auto" else pick_judge({n: results[n] for n in CANDIDATES}, args.max_parse_failure)
    )
    if chosen not in CANDIDATES:
        raise ConfigError(f"--ship: expected auto or one of {', '.join(CANDIDATES)}, got {chosen!r}")
    meta = ship_judge(out, chosen, out / "shipped")
    if not (out / "eval_shipped.json").is_file():
        from train_judge.pocket_judge import merge_experts_onto

        merge_experts_onto(Path(base), out / "shipped", out / "shipped-model")
    results["shipped"] = evaluate("shipped", str(out / "shipped-model"))
    order = ["base", *CANDIDATES, "shipped"]
    table = ev.results_table([results[n] for n in order])
    (out / "table.md").write_text(table + "\n", encoding="utf-8")
    summary = {"chosen": chosen, "ship": meta, "timings_s": timings, "table": table}
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> None:
    from .evaluate import add_evaluation_flags

    ap = argparse.ArgumentParser(
        prog="python -m train_judge.pocket_pipeline",
        description=__doc__.split("\n\n")[0],
        formatter_class=PlainHelpFormatter,
    )
    ap.add_argument("--out", required=True, help="folder for experts, merges, evaluations and the shipped judge")
    ap.add_argument("--model", default="local:smollm2", help="base model (overrides the configs' model)")
    ap.add_argument("--absolute-config", default=str(CONFIGS / "pocket_absolute_gpu.yaml"))
    ap.add_argument("--relative-config", default=str(CONFIGS / "pocket_relative_gpu.yaml"))
    ap.add_argument("--max-steps", type=int, default=None, help="cap SFT steps (smoke runs)")
    add_evaluation_flags(ap)
    ap.set_defaults(pairs=192, max_tokens=1024, num_samples=3, batch_size=384)
    ap.add_argument("--ship", default="auto", help=f"auto or one of {', '.join(CANDIDATES)}")
    ap.add_argument(
        "--max-parse-failure",
        type=float,
        default=0.25,
        help="--ship auto: the most absolute (and pairwise) parse failures a shipped judge may have",
    )
    args = ap.parse_args(argv)  # counts refused here: before hours of training, not at the evaluation
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        summary = run(args)
    except PromRewardError as e:  # bad config or data: one message, exit status 2 (as train_judge.sft and .merge)
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print(summary["table"])
    print(f"shipped: {summary['chosen']} -> {Path(args.out) / 'shipped'}")


if __name__ == "__main__":
    main()
