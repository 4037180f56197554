"""The entry points of the job engine: ``grade_file``, ``compare_file``, ``pairs_file``, in this process or (``ray=``)
on Ray Data; each returns a ``JobSummary``."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.declared import refuse_unknown
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat
from prom_reward.jobs.batch import judge_locally, judge_on_ray
from prom_reward.jobs.kinds import CompareJob, GradeJob
from prom_reward.jobs.pairs import PairsJob
from prom_reward.jobs.parts import merge_parts
from prom_reward.jobs.plan import SKIPPED, judge_fingerprint, prepare_job
from prom_reward.jobs.spec import JobConfig, JobKind, RayConfig
from prom_reward.jobs.summary import JobSummary
from prom_reward.preferences.config import PreferenceConfig
from prom_reward.rewards.outage import Outage
from prom_reward.rewards.startup import job_canary, over_http


def run_job(
    kind: JobKind,
    inputs: Any,
    output: str | Path,
    judge: Any,
    config: JobConfig | None = None,
    ray: RayConfig | None = None,
) -> JobSummary:
    """Run one job: locally, or on Ray when ``ray`` is given."""
    cfg = config or JobConfig()
    start = time.perf_counter()
    refusals = {  # on Ray, the first that holds
        "judge: on Ray give PrometheusJudge keyword arguments (a dict): every replica builds its own "
        "judge": not isinstance(judge, dict),
        "--store with --ray: every replica would write one SQLite file; fix: drop --store (--resume skips the "
        "batches already committed)": isinstance(judge, dict) and bool(judge.get("store")),
        "pairs on Ray read the wide layout (one row per prompt with its completions); fix: group a long-layout "
        "file into wide rows first, or run without --ray": kind.regroups,
    }
    if ray is not None and (why := next((why for why, holds in refusals.items() if holds), None)):
        raise ConfigError(why)
    fmt = judge_format_of(judge)
    kind = kind.check_format(fmt)  # before the output is touched: a format that cannot do the job
    judged = judge_fingerprint(judge)
    if fmt.name != DEFAULT_FORMAT:  # recorded also when a preset picked it: the report reads the scale from here
        judged["format"] = fmt.name
    plan = prepare_job(kind, inputs, output, judged, cfg)
    summary = plan.summary
    canary = ray is None or over_http(judge)  # on Ray, in the driver for a judge server only: its client is cheap
    if plan.shards and canary:
        built = JudgeSpec.of(judge).build() if isinstance(judge, dict) else judge
        try:
            job_canary(built, kind.task(), kind.rubric, expected=kind.name == "grade")
            if ray is None:
                judge_locally(plan, built, summary, cfg.progress, Outage(cfg.outage))
        finally:
            if built is not judge:
                built.close()
    if plan.shards and ray is not None:
        judge_on_ray(plan, judge, ray, cfg, summary)
    tgt = plan.target
    if tgt.merged:
        summary.output_rows = merge_parts(tgt.folder, tgt.output, tgt.fmt, tgt.schema)
        if tgt.skipped is not None:
            merge_parts(tgt.folder / SKIPPED, tgt.skipped, "jsonl")
    else:
        summary.output_rows = summary.resumed_rows + summary.rows
    summary.seconds = time.perf_counter() - start
    return summary


def judge_format_of(judge: Any) -> JudgeFormat:
    """The judge format of ``judge`` (a ``PrometheusJudge``, or its keyword arguments), known without building it."""
    return JudgeSpec.of(judge).judge_format if isinstance(judge, dict) else cast(JudgeFormat, judge.format)


def _run(
    kind: Any,
    inputs: Any,
    output: str | Path,
    judge: Any,
    config: JobConfig | None,
    ray: RayConfig | bool | None,
    options: dict[str, Any],
    pairs: PreferenceConfig | None = None,
) -> JobSummary:
    """``options`` routed to the fields of the kind (pairs: ``PreferenceConfig``), ``JobConfig`` and (on Ray:
    ``ray`` a ``RayConfig`` or True) ``RayConfig``, then ``run_job``; an unknown name is a ``ConfigError``."""
    ray = RayConfig() if ray is True else ray or None
    classes = [kind.settings or kind, JobConfig, *([RayConfig] if ray else [])]
    names = [{f.name for f in dataclasses.fields(c) if f.init} for c in classes]  # no name in two of them
    refuse_unknown(options, sorted(set().union(*names)), "option")
    parts = [{k: v for k, v in options.items() if k in n} for n in names]
    cfg = dataclasses.replace(config or JobConfig(), **parts[1])
    ray_cfg = dataclasses.replace(ray, **parts[2]) if ray else None
    job = PairsJob(dataclasses.replace(pairs or PreferenceConfig(), **parts[0])) if kind.settings else kind(**parts[0])
    return run_job(job, inputs, output, judge, cfg, ray_cfg)


def grade_file(
    inputs: Any,
    output: str | Path,
    judge: Any,
    *,
    config: JobConfig | None = None,
    ray: RayConfig | bool | None = None,
    **options: Any,
) -> JobSummary:
    """Absolute grades for every row of ``inputs`` (``prom_reward.jobs.kinds``), in this process, or with ``ray``
    (a ``RayConfig``, or True: its defaults; ``judge`` then ``PrometheusJudge`` keyword arguments) on a pool of
    Ray judge actors (``prom_reward.jobs.batch.judge_on_ray``)."""
    return _run(GradeJob, inputs, output, judge, config, ray, options)


def compare_file(
    inputs: Any,
    output: str | Path,
    judge: Any,
    *,
    config: JobConfig | None = None,
    ray: RayConfig | bool | None = None,
    **options: Any,
) -> JobSummary:
    """Pairwise verdicts for every row of ``inputs`` (``prom_reward.jobs.kinds``); ``ray`` as ``grade_file``'s."""
    return _run(CompareJob, inputs, output, judge, config, ray, options)


def pairs_file(
    inputs: Any,
    output: str | Path,
    judge: Any,
    *,
    pairs: PreferenceConfig | None = None,
    config: JobConfig | None = None,
    ray: RayConfig | bool | None = None,
    **options: Any,
) -> JobSummary:
    """DPO pairs from every row of ``inputs`` (``prom_reward.jobs.pairs``); ``**options`` may set
    ``PreferenceConfig`` fields over ``pairs``; ``ray`` as ``grade_file``'s (the wide layout)."""
    return _run(PairsJob, inputs, output, judge, config, ray, options, pairs)


__all__ = ["compare_file", "grade_file", "pairs_file", "run_job"]
