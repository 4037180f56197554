"""Options of a job (``JobConfig``: batches, resume, overwrite, outage policy) and of its Ray pool (``RayConfig``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from prom_reward.declared import check, refuse_unknown, setting
from prom_reward.errors import ConfigError
from prom_reward.rewards.outage import OutagePolicy

JOB_OUTAGE = OutagePolicy(on_exhausted="fail")
"""A job's outage policy unless given: past ``budget_s``, the rows left unanswered are marked for ``--resume``."""


@dataclass(frozen=True)
class JobConfig:
    """How a job reads, commits and resumes (the same locally and on Ray)."""

    batch_size: int = setting(
        256,
        help="Rows per judge call and per part file: the unit of commit and of what a killed run judges again.",
        ge=1,
    )
    resume: bool = setting(
        False,
        help="""Continue the job that wrote the output (same input and options, checked): judge only the rows not
        committed yet, and again those whose judge backend failed.""",
    )
    overwrite: bool = setting(
        False, help="Start over on an existing output (it stays intact until the new one is complete)."
    )
    progress: bool = setting(True, help="Show a progress bar (and Ray Data's) on stderr.")
    outage: OutagePolicy = setting(
        JOB_OUTAGE,
        help="""How requests the judge's transport failed are asked again (``prom_reward.rewards.outage``; a dict of
        its fields over ``JOB_OUTAGE``'s): past the budget, ``"fail"`` marks their rows for ``--resume`` and
        ``"raise"`` stops the job (``JudgeUnavailableError``, exit 4).""",
    )

    def __post_init__(self) -> None:
        if isinstance(self.outage, dict):
            refuse_unknown(self.outage, [f.name for f in dataclasses.fields(OutagePolicy)], "field", "outage")
            object.__setattr__(self, "outage", dataclasses.replace(JOB_OUTAGE, **self.outage))
        check(self)
        if self.resume and self.overwrite:
            raise ConfigError(
                "{resume} and {overwrite} both given; fix: give one ({resume} continues OUTPUT, {overwrite} starts "
                "it over)",
                mentions=("resume", "overwrite"),
            )


@dataclass(frozen=True)
class RayConfig:
    """The pool of judge actors of a job on Ray (``prom_reward.jobs.batch.judge_on_ray``)."""

    replicas: int | str = setting(
        1,
        help="""Judge actors: a number, or ``"all"``: every GPU of the cluster (every CPU on a CPU cluster) divided
        by what one replica takes.""",
        choices=("all",),
        ge=1,
    )
    num_gpus: float | None = setting(
        None,
        help="GPUs per replica; None: the judge's ``tensor_parallel_size`` where the cluster has GPUs, else 0.",
        ge=0,
    )
    num_cpus: float = setting(1.0, help="CPUs per replica (what a CPU engine gets to itself).", gt=0)
    address: str | None = setting(
        None, help="Ray cluster to join; None: ``RAY_ADDRESS`` if set, else a local Ray started for this job."
    )
    env: dict[str, str] = setting(
        factory=dict, help="Environment variables of the judge actors (``VLLM_CPU_KVCACHE_SPACE``, ...)."
    )
    warmup: bool = setting(
        True,
        help="""A replica with an in-process engine (vllm, transformers; no judgment store) judges one dummy row
        when it starts (``batch.warm_up``), so the engine's first-call costs go with its start-up, not
        into the first batch's time.""",
    )

    def __post_init__(self) -> None:
        check(self)
        object.__setattr__(self, "num_cpus", float(self.num_cpus))
