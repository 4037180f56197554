"""``run_probe``: how exploitable is this judge? LLMBar accuracy (Natural vs Adversarial) and score shifts
under response edits, as one JSON-able record.

Example:
    >>> import json, os, tempfile
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.backends.scripted import ScriptedBackend
    >>> path = os.path.join(tempfile.mkdtemp(), "items.jsonl")
    >>> _ = open(path, "w").write(json.dumps({"instruction": "Say hi.", "response": "Hi."}) + "\\n")
    >>> judge = PrometheusJudge(backend=ScriptedBackend(respond=lambda request, i: "Fine. [RESULT] 4"))
    >>> record = run_probe(judge, ProbeConfig(parts=("shifts",), items=path, edits=("none", "self_grade")))
    >>> record["shifts"]["edits"]["self_grade"]["mean_shift"], record["llmbar"]
    (0.0, None)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.core.protocol import Judge
from prom_reward.errors import ConfigError, InputError, UnknownNameError
from prom_reward.format.rubrics import get_rubric
from prom_reward.probe.data import LLMBAR_SETS, LLMBarPair, ProbeItem, checkout_data_dir, load_items, load_llmbar
from prom_reward.probe.edits import DEFAULT_EDITS, EDITS
from prom_reward.probe.llmbar import llmbar_accuracy
from prom_reward.probe.shifts import score_shifts

PARTS = ("llmbar", "shifts")
RECORD_VERSION = 2


@dataclass(frozen=True)
class ProbeConfig:
    """What the probe runs on and how."""

    parts: tuple[str, ...] = PARTS
    """Which parts to run: ``llmbar`` (pairwise accuracy) and/or ``shifts`` (score shifts under edits)."""
    llmbar: str | None = None
    """The LLMBar folder; None: ``benchmarks/data/llmbar`` of this checkout (an installed wheel has none)."""
    items: str | None = None
    """The graded items file; None: ``benchmarks/data/vicuna_eval.json`` of this checkout."""
    limit: int | None = None
    """Pairs per LLMBar set and graded items at most (a seeded subset); None: all."""
    edits: tuple[str, ...] = DEFAULT_EDITS
    """The response edits (``prom_reward.probe.edits.EDITS``)."""
    rubric: Any = "helpfulness"
    """The rubric of LLMBar's pairs, and of items that have none."""
    expected: bool = False
    """Shifts of the expected score (needs a judge with ``expected_score=True``) instead of the sampled one."""
    baseline_samples: int = 3
    """Grades of each unedited response whose mean the edits' grades are compared with."""
    seed: int = 0
    """Seeds the subsets, the edits' random choices and the bootstrap."""
    resamples: int = 2000
    """Bootstrap resamples per interval."""

    def __post_init__(self) -> None:
        if not self.parts or any(p not in PARTS for p in self.parts):
            raise ConfigError(f"parts: expected some of {', '.join(PARTS)}, got {list(self.parts)!r}")
        try:
            get_rubric(self.rubric)  # a mistyped rubric fails here, not on every item
        except (ConfigError, UnknownNameError) as e:
            raise ConfigError(f"rubric: {e}") from None
        for name in self.edits:
            try:
                EDITS.get(name)
            except UnknownNameError as e:
                raise ConfigError(f"edits: {e}") from e
        for name, low, optional in (
            ("limit", 1, True),
            ("baseline_samples", 1, False),
            ("resamples", 100, False),
            ("seed", 0, False),
        ):
            value = getattr(self, name)
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}: expected an int >= {low}{' or None' if optional else ''}, got {value!r}")

    def llmbar_dir(self) -> Path:
        """The LLMBar folder to read (the checkout's when not given)."""
        return _default(
            self.llmbar,
            "llmbar",
            "--llmbar DIR (the folder with Natural.json and Adversarial_*.json from princeton-nlp/LLMBar)",
        )

    def items_file(self) -> Path:
        """The graded items file to read (the checkout's Vicuna file when not given)."""
        return _default(
            self.items,
            "vicuna_eval.json",
            "--items FILE (.jsonl rows with instruction, response and optionally reference_answer, rubric)",
        )


def _default(given: str | None, name: str, flag: str) -> Path:
    if given is not None:
        return Path(given)
    data = checkout_data_dir()
    if data is None or not (data / name).exists():
        raise InputError(
            f"no probe data given and none found beside this installation (a checkout of prom-reward "
            f"has it in benchmarks/data/{name}); fix: pass {flag}",
            field=name,
        )
    return data / name


@dataclass(frozen=True)
class ProbeInputs:
    """The data a probe run judges (read and checked before any judge is built)."""

    pairs: dict[str, list[LLMBarPair]] | None
    """LLMBar pairs by set (None: the llmbar part is not run)."""
    items: list[ProbeItem] | None
    """Graded items (None: the shifts part is not run)."""


def load_inputs(cfg: ProbeConfig) -> ProbeInputs:
    """Read and check the inputs ``cfg`` names (raises ``InputError`` naming the file, row and flag)."""
    return ProbeInputs(
        load_llmbar(cfg.llmbar_dir(), cfg.limit, cfg.seed, LLMBAR_SETS) if "llmbar" in cfg.parts else None,
        load_items(cfg.items_file(), cfg.limit, cfg.seed) if "shifts" in cfg.parts else None,
    )


def run_probe(
    judge: Judge,
    config: ProbeConfig | None = None,
    *,
    inputs: ProbeInputs | None = None,
    judge_label: str | None = None,
) -> dict[str, Any]:
    """Run the probe's parts with ``judge`` and return the record (what ``prom-reward probe`` writes as JSON).

    ``inputs``: from ``load_inputs(config)`` (read here when not given, before the judge is called).
    """
    cfg = config or ProbeConfig()
    inputs = inputs or load_inputs(cfg)
    pairs, items = inputs.pairs, inputs.items
    start = time.perf_counter()
    record: dict[str, Any] = {
        "version": RECORD_VERSION,
        "judge": judge_label or type(judge).__name__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {
            **dataclasses.asdict(cfg),
            "llmbar": str(cfg.llmbar_dir()) if pairs is not None else None,
            "items": str(cfg.items_file()) if items is not None else None,
        },
        "sampling": _asdict(judge.sampling),
        "llmbar": None,
        "shifts": None,
    }
    if pairs is not None:
        t = time.perf_counter()
        record["llmbar"] = llmbar_accuracy(judge, pairs, rubric=cfg.rubric, seed=cfg.seed, resamples=cfg.resamples)
        record["llmbar"]["seconds"] = time.perf_counter() - t
    if items is not None:
        t = time.perf_counter()
        record["shifts"] = score_shifts(
            judge,
            items,
            cfg.edits,
            rubric=cfg.rubric,
            expected=cfg.expected,
            baseline_samples=cfg.baseline_samples,
            seed=cfg.seed,
            resamples=cfg.resamples,
        )
        record["shifts"]["seconds"] = time.perf_counter() - t
    record["seconds"] = time.perf_counter() - start
    record["judge_stats"] = _asdict(judge.stats)
    fmt = judge.format  # what the report names: the format's verdict marker after which verdicts were forced
    record["judge_format"] = {"name": fmt.name, "verdict_marker": (fmt.force_prefix or "").strip() or None}
    return record


def _asdict(value: Any) -> dict[str, Any] | None:
    """A judge's dataclass attribute (sampling, counters) as a dict; None for anything else."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else None
