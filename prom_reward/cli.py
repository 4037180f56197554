"""The ``prom-reward`` command line.

``prom-reward grade IN -o OUT --rubric NAME|FILE [--model M | --server URL ...]``
grades every row of a .jsonl/.json/.parquet file and writes the input rows plus
``score``, ``feedback``, ``expected_score``, ``probabilities``, ``judge_failures``.
Rows are judged in batches and written as they finish; ``--resume`` skips the rows
an interrupted run already wrote. ``prom-reward compare`` does the same with pairwise verdicts for rows
of ``instruction``, ``response_a``, ``response_b`` (both orders unless ``--no-swap``; ``winner``, ``p_a``,
``tie``, ``swap_agreement`` ... ``judge_error``: ``prom_reward.compare_rows``). ``--ray`` (grade, compare,
pairs) runs the same job as a Ray Data pipeline on ``--replicas N|all`` judge replicas, locally or on
the cluster of ``--address`` / ``RAY_ADDRESS`` (``prom_reward.integrations.ray_grade``, docs/serving.md).

``prom-reward pairs IN -o OUT.jsonl --strategy best_vs_worst|all_pairs --min-margin X
--rubric NAME|FILE [--model M | --server URL ...] [--num-samples k] [--resume]`` turns rows of
``prompt`` + ``completions`` into DPO preference pairs (``prom_reward.preferences``), writing them
chunk by chunk with ``OUT.skipped.jsonl`` and ``OUT.progress.json`` beside them; ``--resume``
continues after the last finished chunk. The stats are printed as one JSON line on stdout.

``prom-reward store info|export STORE [-o OUT.jsonl|.parquet]`` shows or exports a judgment store.

``prom-reward reward-server --server URL --failure-reward NUMBER|min`` serves the judge to OpenRLHF
(``--reward.remote_url http://...``); ``prom-reward openrlhf-func-path`` prints the ``reward_func``
file for ``--reward.remote_url path.py`` (docs/openrlhf.md).

Example:
    $ prom-reward grade rollouts.jsonl -o graded.jsonl --rubric helpfulness --model smollm2-135m-instruct
    $ prom-reward compare ab.jsonl -o verdicts.jsonl --rubric helpfulness --server URL
    $ prom-reward pairs samples.jsonl -o pairs.jsonl --strategy all_pairs --rubric helpfulness --server URL
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import islice
from typing import Any, Iterator, Sequence

from .errors import PromRewardError
from .io import RowWriter, count_rows, read_rows


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while True:
        chunk = list(islice(rows, size))
        if not chunk:
            return
        yield chunk


def _judge_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``PrometheusJudge`` keyword arguments from the judge options (what ``--ray`` sends to each replica)."""
    sampling: dict[str, Any] = {}
    if args.max_tokens is not None:
        sampling["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    common: dict[str, Any] = dict(sampling=sampling or None, num_samples=args.num_samples,
                                  expected_score=args.expected, truncate_response=args.truncate)
    if args.force_verdict:
        common["force_verdict"] = True
    if getattr(args, "store", None):
        common["store"] = args.store
    if args.server:
        return dict(model=args.model, backend="openai", base_url=args.server,
                    endpoint=args.endpoint, wire=args.wire or "chat", **common)
    engine: dict[str, Any] = {}
    if args.wire:
        engine["wire"] = args.wire
    if args.max_model_len:
        engine["max_model_len"] = args.max_model_len
    if args.backend == "vllm":
        engine["enforce_eager"] = args.enforce_eager
        engine["tensor_parallel_size"] = args.tensor_parallel_size
    return dict(model=args.model, backend=args.backend, **common, **engine)


def _build_judge(args: argparse.Namespace) -> Any:
    from .judge import PrometheusJudge

    return PrometheusJudge(**_judge_kwargs(args))


def _grade_rows(judge: Any, rows: list[dict[str, Any]], args: argparse.Namespace,
                start: int = 0) -> list[dict[str, Any]]:
    """Grade a batch of rows (``start``: the first row's position in the input, for error messages)."""
    from .compare_rows import check_rows

    rubric = check_rows(rows, args, start, keys=("instruction_col", "response_col"))
    refs = [r.get(args.reference_col) for r in rows]
    grades = judge.grade([r[args.instruction_col] for r in rows], [r[args.response_col] for r in rows], rubric,
                         refs if any(x is not None for x in refs) else None)
    out = []
    for r, g in zip(rows, grades):
        out.append({**r, "score": g.score, "feedback": g.feedback, "expected_score": g.expected_score,
                    "probabilities": {str(k): v for k, v in g.probabilities.items()} if g.probabilities else None,
                    "judge_failures": g.failures, "judge_retries": g.retries, "forced_verdicts": g.forced})
    return out


def _judge_file(args: argparse.Namespace, desc: str, judge_chunk: Any,
                counts: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
    """Stream ``args.input`` through ``judge_chunk(judge, rows, start)`` in batches to ``args.output``;
    ``--resume`` skips the rows already there. Returns (rows judged, rows resumed, ``counts`` totals)."""
    from tqdm import tqdm

    done = count_rows(args.output) if args.resume else 0
    rows = read_rows(args.input)
    if done:
        rows = islice(rows, done, None)
    judge = _build_judge(args)
    totals = dict.fromkeys(counts, 0)
    start = time.perf_counter()
    n = 0
    try:
        with RowWriter(args.output, append=bool(done)) as writer, \
                tqdm(desc=desc, unit="item", initial=done, disable=args.quiet) as bar:
            for chunk in _chunks(rows, args.batch_size):
                judged = judge_chunk(judge, chunk, done + n)
                writer.write(judged)
                n += len(judged)
                for k, pred in counts.items():
                    totals[k] += sum(1 for r in judged if pred(r))
                bar.update(len(judged))
                bar.set_postfix(**totals, items_s=f"{n / max(time.perf_counter() - start, 1e-9):.2f}")
    finally:
        judge.close()
    return n, done, totals


def cmd_grade(args: argparse.Namespace) -> int:
    if args.ray:
        return _ray_job("grade", args)
    n, done, t = _judge_file(args, "grading", lambda judge, rows, start: _grade_rows(judge, rows, args, start),
                             {"failures": lambda g: g["score"] is None})
    print(f"graded {n} rows ({done} resumed) -> {args.output}; {t['failures']} without a verdict", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Pairwise verdicts per row (``prom_reward.compare_rows``)."""
    from .compare_rows import compare_rows, is_failure

    args.swap = not args.no_swap
    if args.ray:
        return _ray_job("compare", args)
    n, done, t = _judge_file(args, "comparing", lambda judge, rows, start: compare_rows(judge, rows, args, start),
                             {"failures": is_failure, "ties": lambda r: r["tie"]})
    print(f"compared {n} rows ({done} resumed) -> {args.output}; {t['ties']} ties, {t['failures']} without a "
          "verdict", file=sys.stderr)
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .preference_config import PreferenceConfig
    from .preferences import build_preference_dataset

    cfg = PreferenceConfig(
        strategy=args.strategy, min_margin=args.min_margin, rubric=args.rubric, swap=not args.no_swap,
        max_tie_rounds=args.max_tie_rounds, chunk_size=args.chunk_size, layout=args.layout,
        prompt_column=args.prompt_col, completions_column=args.completions_col,
        completion_column=args.completion_col, reference_column=args.reference_col, rubric_column=args.rubric_col,
        keep_columns=tuple(args.keep_col or ()),
    )
    if args.ray:
        return _ray_job("pairs", args, cfg)
    total = count_rows(args.input) if args.layout == "wide" else None
    judge = _build_judge(args)
    try:
        with tqdm(desc="pairs", unit="row", total=total, disable=args.quiet) as bar:
            def progress(stats: Any) -> None:
                bar.n = stats.rows
                bar.set_postfix(pairs=stats.pairs, skipped=sum(stats.skipped.values()), refresh=False)
                bar.refresh()

            _, stats = build_preference_dataset(judge, args.input, cfg, output=args.output, resume=args.resume,
                                                progress=progress)
    finally:
        judge.close()
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(stats.skipped.items())) or "none"
    print(f"{stats.pairs} pairs from {stats.rows} rows ({stats.resumed_rows} resumed) -> {args.output}; "
          f"skipped: {skipped}", file=sys.stderr)
    print(json.dumps(stats.to_dict()))
    return 0


def _ray_job(task: str, args: argparse.Namespace, pairs: Any = None) -> int:
    """``--ray``: the same job as a Ray Data pipeline over a pool of judge replicas
    (``prom_reward.integrations.ray_grade``)."""
    from .errors import ConfigError
    from .integrations.ray_config import RayJobConfig
    from .integrations.ray_grade import compare_dataset, grade_dataset, pairs_dataset

    if getattr(args, "store", None):
        raise ConfigError("--store with --ray: every replica would write one SQLite file; drop --store "
                          "(--resume skips the shards already written)")
    if args.replicas != "all" and not args.replicas.isdigit():
        raise ConfigError(f"--replicas: expected a number or 'all', got {args.replicas!r}")
    cfg = RayJobConfig(judge=_judge_kwargs(args), replicas=args.replicas if args.replicas == "all" else
                       int(args.replicas), num_gpus=args.gpus_per_replica, num_cpus=args.cpus_per_replica,
                       resume=args.resume, address=args.address, progress=not args.quiet,
                       rows_per_shard=args.chunk_size if task == "pairs" else args.batch_size)
    if task == "pairs":
        summary = pairs_dataset(args.input, args.output, judge=cfg.judge, pairs=pairs, config=cfg)
    elif task == "compare":
        from .compare_rows import COMPARE_COLUMNS

        summary = compare_dataset(args.input, args.output, judge=cfg.judge, rubric=args.rubric, swap=args.swap,
                                  config=cfg, **{k: getattr(args, k) for k in COMPARE_COLUMNS})
    else:
        summary = grade_dataset(args.input, args.output, judge=cfg.judge, rubric=args.rubric, config=cfg,
                                instruction_col=args.instruction_col, response_col=args.response_col,
                                reference_col=args.reference_col, rubric_col=args.rubric_col)
    print(summary.text(), file=sys.stderr)
    print(json.dumps(summary.to_dict()))
    return 0


def _add_ray_options(g: argparse.ArgumentParser) -> None:
    """``--ray`` and the options of a Ray job (grade, compare and pairs)."""
    r = g.add_argument_group("Ray (offline scoring on a pool of judge replicas; docs/serving.md)")
    r.add_argument("--ray", action="store_true", help="run as a Ray Data pipeline: local Ray, or the cluster "
                   "of --address / RAY_ADDRESS; OUTPUT.parts/ holds one part file per shard")
    r.add_argument("--address", help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray)")
    r.add_argument("--replicas", default="1", help="judge replicas: a number or 'all' (every GPU of the cluster "
                   "/ --gpus-per-replica); default 1")
    r.add_argument("--gpus-per-replica", type=float, help="default: --tensor-parallel-size on a GPU cluster, else 0")
    r.add_argument("--cpus-per-replica", type=float, default=1.0)


def _add_judge_options(g: argparse.ArgumentParser) -> None:
    """The options ``_build_judge`` reads (shared by every subcommand that judges)."""
    g.add_argument("--model", default=None, help="hub id, local folder, or preset (e.g. prometheus-7b-v2.0)")
    g.add_argument("--server", action="append", help="OpenAI-compatible base URL (repeatable)")
    g.add_argument("--backend", default="vllm", choices=["vllm", "transformers"])
    g.add_argument("--endpoint", default="chat", choices=["chat", "completions"])
    g.add_argument("--wire", choices=["chat", "inst", "raw"])
    g.add_argument("--num-samples", type=int, default=1)
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--temperature", type=float)
    g.add_argument("--expected", action="store_true", help="request logprobs; write P(1..5) and the expected score")
    g.add_argument("--force-verdict", action="store_true")
    g.add_argument("--truncate", action="store_true", help="shorten over-long responses instead of failing")
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--tensor-parallel-size", type=int, default=1)
    g.add_argument("--enforce-eager", action="store_true")


def cmd_reward_server(args: argparse.Namespace) -> int:
    """Serve the judge as an OpenRLHF remote reward model (``prom_reward.integrations.openrlhf_server``)."""
    import os

    from .integrations.openrlhf_server import serve_reward
    from .reward import PrometheusReward

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
    reward = PrometheusReward(_build_judge(args), rubric=args.rubric, mode=args.mode, score=args.score,
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
    _add_judge_options(s)
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
    from .integrations.openrlhf_func import reward_func_path

    print(reward_func_path())
    return 0


def cmd_store(args: argparse.Namespace) -> int:
    """``prom-reward store info|export STORE [-o OUT]``: look into or export a judgment store."""
    from pathlib import Path

    from .errors import ConfigError
    from .store import JudgmentStore

    if not Path(args.path).is_file():
        raise ConfigError(f"{args.path}: no judgment store there (expected the SQLite file given to --store)")
    with JudgmentStore(args.path) as store:
        if args.action == "export":
            if not args.output:
                raise ConfigError("prom-reward store export: give -o OUT.jsonl or -o OUT.parquet")
            n = store.export(args.output)
            print(f"exported {n} judgments -> {args.output}", file=sys.stderr)
            return 0
        print(json.dumps({"path": str(store.path), "judgments": len(store), "models": store.models(),
                          "integrity": store.integrity_check()}))
    return 0


def _add_store_parser(sub: Any) -> None:
    s = sub.add_parser("store", help="look into (info) or export (export -o OUT) a judgment store")
    s.add_argument("action", choices=["info", "export"])
    s.add_argument("path", help="the SQLite judgment store (as given to --store)")
    s.add_argument("-o", "--output", help="export: .jsonl or .parquet")
    s.set_defaults(func=cmd_store)


def _add_rows_parser(sub: Any, name: str, summary: str, func: Any, *columns: str) -> argparse.ArgumentParser:
    """A row-by-row judging command (grade, compare): IN -o OUT, judge, batch, resume, ``--X-col`` options, Ray."""
    g = sub.add_parser(name, help=summary)
    g.add_argument("input", help=".jsonl, .json or .parquet")
    g.add_argument("-o", "--output", required=True, help=".jsonl (resumable) or .parquet")
    g.add_argument("--rubric", help="built-in name (helpfulness, ...), or a JSON/YAML rubric file; "
                                    "default: each row's rubric column")
    _add_judge_options(g)
    g.add_argument("--batch-size", type=int, default=256, help="rows per judge call (and per write)")
    g.add_argument("--resume", action="store_true", help="skip rows already written to OUTPUT (.jsonl); with "
                   "--ray: skip finished shards, judge again the shards whose backend failed")
    for col in columns:  # --instruction-col, --response-a-col, --reference-col (reference_answer) ...
        flag = col.replace("_answer", "").replace("_", "-")
        g.add_argument(f"--{flag}-col", dest=f"{flag.replace('-', '_')}_col", default=col)
    g.add_argument("--quiet", action="store_true")
    _add_ray_options(g)
    g.set_defaults(func=func)
    return g


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prom-reward", description="Prometheus-style judges as rewards.")
    sub = p.add_subparsers(dest="command", required=True)
    g = _add_rows_parser(sub, "grade", "absolute grades for a file of (instruction, response) rows", cmd_grade,
                         "instruction", "response", "reference_answer", "rubric")
    g.add_argument("--store", help="SQLite judgment store: saves each batch's judge results; "
                   "a re-run (or --resume after a crash) recomputes nothing stored")
    c = _add_rows_parser(sub, "compare", "pairwise verdicts (A or B, both orders) for rows of instruction, "
                         "response_a, response_b", cmd_compare,
                         "instruction", "response_a", "response_b", "reference_answer", "rubric")
    c.add_argument("--no-swap", action="store_true", help="judge one order only (default: both orders, "
                   "a winner only where they agree)")

    d = sub.add_parser("pairs", help="DPO preference pairs from several completions per prompt")
    d.add_argument("input", help=".jsonl, .json or .parquet: prompt + completions per row")
    d.add_argument("-o", "--output", required=True, help=".jsonl (resumable); sidecars .skipped.jsonl, .progress.json")
    d.add_argument("--strategy", default="best_vs_worst", choices=["best_vs_worst", "all_pairs"])
    d.add_argument("--min-margin", type=float, default=0.0,
                   help="drop pairs below this margin (score points; P(win) units for all_pairs)")
    d.add_argument("--rubric", help="built-in name (helpfulness, ...), or a JSON/YAML rubric file; "
                                    "default: each row's rubric column")
    _add_judge_options(d)
    d.add_argument("--max-tie-rounds", type=int, help="best_vs_worst: re-grading rounds for all-equal rows")
    d.add_argument("--no-swap", action="store_true", help="all_pairs: judge one order only")
    d.add_argument("--chunk-size", type=int, default=64, help="rows per judge call (and per write)")
    d.add_argument("--resume", action="store_true", help="continue an interrupted run on OUTPUT")
    d.add_argument("--layout", default="wide", choices=["wide", "long"],
                   help="long: one row per completion, consecutive rows with the same prompt grouped")
    d.add_argument("--prompt-col", default="prompt")
    d.add_argument("--completions-col", default="completions")
    d.add_argument("--completion-col", default="completion", help="the completion column of the long layout")
    d.add_argument("--reference-col", default="reference_answer")
    d.add_argument("--rubric-col", default="rubric")
    d.add_argument("--keep-col", action="append", help="input column copied into each pair (repeatable)")
    d.add_argument("--quiet", action="store_true")
    _add_ray_options(d)
    d.set_defaults(func=cmd_pairs)
    from .serve import add_serve_parser

    add_serve_parser(sub)
    _add_reward_server_parser(sub)
    f = sub.add_parser("openrlhf-func-path", help="print the reward_func file for OpenRLHF --reward.remote_url")
    f.set_defaults(func=cmd_openrlhf_func_path)
    _add_store_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("grade", "compare", "pairs") and not args.model and not args.server:
        print(f"prom-reward {args.command}: give --model M (in-process vLLM) or --server URL", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except PromRewardError as e:
        print(f"prom-reward: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
