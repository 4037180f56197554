"""``run_probe``: the probe's parts as one JSON-able record, each run when the judge's format judges its task
(``PART_TASKS``; ``not_run`` says why not), refused if asked for otherwise: LLMBar accuracy per set over both orders
with the Natural-minus-Adversarial ``gaps`` (``llmbar_accuracy``), and how much each response edit moves a grade
against ``baseline_samples`` grades of the unchanged response (``score_shifts``). What they measure: docs/hacking.md."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, cast

from prom_reward.core.protocol import Judge, Retry
from prom_reward.core.results import all_answered
from prom_reward.declared import check, setting
from prom_reward.errors import ConfigError, InputError, PromRewardError, UnknownNameError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, Task, get_judge_format, unsupported_task
from prom_reward.format.rubrics import get_rubric
from prom_reward.probe import data
from prom_reward.stats import bootstrap_ci

PARTS = ("llmbar", "shifts")
PART_TASKS: dict[str, Task] = {"llmbar": "relative", "shifts": "absolute"}
"""What each part asks the judge for: LLMBar's pairs are compared, the shifts' responses graded."""
RECORD_VERSION = 2


@dataclass(frozen=True)
class ProbeConfig:
    """What the probe runs on and how."""

    parts: tuple[str, ...] | None = setting(
        None,
        help="""Which parts to run: ``llmbar`` (pairwise accuracy) and/or ``shifts`` (score shifts under edits); None:
        every part the judge's format judges (``for_format``).""",
        choices=PARTS,
    )
    llmbar: str | None = setting(
        None, help="The LLMBar folder; None: ``benchmarks/data/llmbar`` of this checkout (an installed wheel has none)."
    )
    items: str | None = setting(
        None, help="The graded items file; None: ``benchmarks/data/vicuna_eval.json`` of this checkout."
    )
    limit: int | None = setting(
        None, help="Pairs per LLMBar set and graded items at most (a seeded subset); None: all.", ge=1
    )
    edits: tuple[str, ...] = setting(data.DEFAULT_EDITS, help="The response edits (``prom_reward.probe.data.EDITS``).")
    rubric: Any = setting("helpfulness", help="The rubric of LLMBar's pairs, and of items that have none.")
    expected: bool = setting(
        False,
        help="Shifts of the expected score (needs a judge with ``expected_score=True``) instead of the sampled one.",
    )
    baseline_samples: int = setting(
        3, help="Grades of each unedited response whose mean the edits' grades are compared with.", ge=1
    )
    seed: int = setting(0, help="Seeds the subsets, the edits' random choices and the bootstrap.", ge=0)
    resamples: int = setting(2000, help="Bootstrap resamples per interval.", ge=100)

    def __post_init__(self) -> None:
        try:
            get_rubric(self.rubric)  # a mistyped rubric fails here, not on every item
        except PromRewardError as e:
            raise ConfigError(str(e), "rubric") from None
        try:
            for name in self.edits:
                data.EDITS.get(name)
        except UnknownNameError as e:
            raise ConfigError(str(e), "edits") from e
        check(self)

    def for_format(self, fmt: JudgeFormat) -> ProbeConfig:
        """This config with the parts a judge in ``fmt`` runs (None: every part it judges); a part asked for that
        ``fmt`` cannot run raises ``ConfigError``."""
        can = tuple(p for p in PARTS if PART_TASKS[p] in fmt.tasks)
        for part in self.parts or ():
            if part not in can:
                fix = f"run only the parts it can: {','.join(can)} ({{parts}})"
                raise ConfigError(
                    f"the {part} part needs {PART_TASKS[part]} judgments, but "
                    f"{unsupported_task(fmt, PART_TASKS[part], fix)}",
                    "parts",
                )
        return dataclasses.replace(self, parts=self.parts or can)

    def llmbar_dir(self) -> Path:
        """The LLMBar folder to read (the checkout's when not given)."""
        flag = "--llmbar DIR (the folder with Natural.json and Adversarial_*.json from princeton-nlp/LLMBar)"
        return _default(self.llmbar, "llmbar", flag)

    def items_file(self) -> Path:
        """The graded items file to read (the checkout's Vicuna file when not given)."""
        flag = "--items FILE (.jsonl rows with instruction, response and optionally reference_answer, rubric)"
        return _default(self.items, "vicuna_eval.json", flag)


def _default(given: str | None, name: str, flag: str) -> Path:
    folder = data.checkout_data_dir()
    if given is None and (folder is None or not (folder / name).exists()):
        raise InputError(
            f"no probe data given and none found beside this installation (a checkout of prom-reward "
            f"has it in benchmarks/data/{name}); fix: pass {flag}",
            field=name,
        )
    return Path(given) if given is not None else cast(Path, folder) / name


@dataclass(frozen=True)
class ProbeInputs:
    """The data a probe run judges, read and checked before any judge is built (None: that part is not run)."""

    pairs: dict[str, list[data.LLMBarPair]] | None
    items: list[data.ProbeItem] | None


def load_inputs(cfg: ProbeConfig, judge_format: JudgeFormat | None = None) -> ProbeInputs:
    """Read and check the inputs of the parts ``cfg`` runs with a judge in ``judge_format`` (None: the default):
    ``ConfigError`` when ``cfg.rubric`` does not fit for a part that judges with it, ``InputError`` naming an item
    whose own rubric does not fit."""
    fmt = judge_format or get_judge_format(DEFAULT_FORMAT)
    parts = cfg.for_format(fmt).parts or ()
    inputs = ProbeInputs(
        data.load_llmbar(cfg.llmbar_dir(), cfg.limit, cfg.seed) if "llmbar" in parts else None,
        data.load_items(cfg.items_file(), cfg.limit, cfg.seed) if "shifts" in parts else None,
    )
    uses = ["llmbar"] if inputs.pairs else []
    if inputs.items and any(it.rubric is None for it in inputs.items):
        uses.append("shifts")
    for part in uses:  # the probe's rubric, for a part that judges with it
        problem = fmt.rubric_problem(get_rubric(cfg.rubric), PART_TASKS[part])
        if problem is not None:
            raise ConfigError(
                f"{problem} (judge format {fmt.name!r}; the {part} part judges with it); fix: pass a rubric that fits",
                "rubric",
            )
    for it in inputs.items or ():
        problem = None if it.rubric is None else fmt.rubric_problem(get_rubric(it.rubric), "absolute")
        if problem is not None:
            raise InputError(
                f"{cfg.items_file()}: item {it.id!r}: rubric: {problem} (judge format {fmt.name!r}); fix: give "
                "items whose rubrics fit (items=), or none, to grade them with the rubric (rubric=)",
                field="rubric",
            )
    return inputs


POOLED = "Adversarial"
"""The name of the four adversarial sets taken together."""


def set_stats(
    pairs: list[data.LLMBarPair], verdicts: list[Any], *, seed: int = 0, resamples: int = 2000
) -> dict[str, Any]:
    """Accuracy statistics of one set from its pairs and their two-order ``Verdict``s."""
    right = []  # per pair: (order 1 right, order 2 right)
    failed = agreed = 0
    for pair, v in zip(pairs, verdicts, strict=True):
        want = "A" if pair.label == 1 else "B"
        winners = tuple(v.order_winners) + (None,) * (2 - len(v.order_winners))
        right.append((winners[0] == want, winners[1] == want))
        failed += sum(w is None for w in winners[:2])
        agreed += winners[0] is not None and winners[0] == winners[1]
    n = len(pairs)
    if not n:
        keys = ("n", "accuracy", "accuracy_ci", "order_accuracy", "both_right", "agreement", "failed")
        return {**dict.fromkeys(keys), "n": 0, "order_accuracy": [None, None], "failed": 0}
    per_pair = [(a + b) / 2 for a, b in right]
    return {
        "n": n,
        "accuracy": fmean(per_pair),
        "accuracy_ci": list(bootstrap_ci(per_pair, seed=seed, resamples=resamples)),
        "order_accuracy": [fmean(float(a) for a, _ in right), fmean(float(b) for _, b in right)],
        "both_right": fmean(float(a and b) for a, b in right),
        "agreement": agreed / n,
        "failed": failed,
    }


def llmbar_accuracy(
    judge: Any,
    pairs: dict[str, list[data.LLMBarPair]],
    *,
    rubric: Any = "helpfulness",
    seed: int = 0,
    resamples: int = 2000,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """``{"sets": {name: set_stats}, "gaps": {name: Natural's accuracy - its}}`` (the pooled adversarial sets as
    ``POOLED``), every pair judged in both orders in one batched call."""
    flat = [p for ps in pairs.values() for p in ps]
    verdicts = judge.compare(
        [p.instruction for p in flat],
        [p.output_1 for p in flat],
        [p.output_2 for p in flat],
        rubric,
        swap=True,
        outage=outage,
    )
    all_answered(verdicts)  # a judge that did not answer measures nothing
    answers = iter(verdicts)  # in the order of flat
    groups = {name: [(p, next(answers)) for p in ps] for name, ps in pairs.items()}
    adversarial = [pv for name, pvs in groups.items() if name.startswith("Adversarial_") for pv in pvs]
    if adversarial:
        groups[POOLED] = adversarial
    sets = {
        name: set_stats([p for p, _ in pvs], [v for _, v in pvs], seed=seed + i, resamples=resamples)
        for i, (name, pvs) in enumerate(groups.items())
    }
    natural = sets.get("Natural", {}).get("accuracy")
    gaps = {
        name: (natural - s["accuracy"]) if natural is not None and s["accuracy"] is not None else None
        for name, s in sets.items()
        if name != "Natural"
    }
    return {"sets": sets, "gaps": gaps}


def edit_stats(
    original: Sequence[float | None], edited: Sequence[float | None], *, seed: int = 0, resamples: int = 2000
) -> dict[str, Any]:
    """Shift statistics of one edit over paired scores (None: the judge failed on that response)."""
    shifts = [e - o for o, e in zip(original, edited, strict=True) if o is not None and e is not None]
    out: dict[str, Any] = {"n": len(shifts), "failed": len(original) - len(shifts)}
    if not shifts:
        return {**out, **dict.fromkeys(("mean_shift", "mean_shift_ci", "rise_share", "rise_share_ci", "fall_share"))}
    rises = [float(s > 0) for s in shifts]
    return {
        **out,
        "mean_shift": fmean(shifts),
        "mean_shift_ci": list(bootstrap_ci(shifts, seed=seed, resamples=resamples)),
        "rise_share": fmean(rises),
        "rise_share_ci": list(bootstrap_ci(rises, seed=seed, resamples=resamples)),
        "fall_share": fmean(float(s < 0) for s in shifts),
    }


def score_shifts(
    judge: Any,
    items: Sequence[data.ProbeItem],
    edits: Sequence[str],
    *,
    rubric: Any = "helpfulness",
    expected: bool = False,
    baseline_samples: int = 3,
    seed: int = 0,
    resamples: int = 2000,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """Grade ``items`` as they are (``baseline_samples`` times) and after each of ``edits``, in one batched call,
    and summarise the shifts per edit and per item."""
    names = [data.EDITS.get(e).name for e in edits]  # unknown names fail here, before any judging
    base = max(1, baseline_samples)
    edited = [[data.apply_edit(name, it, seed, judge.format) for name in names] for it in items]
    flat = [(it, text) for it, texts in zip(items, edited, strict=True) for text in [it.response] * base + texts]
    grades = judge.grade(
        [it.instruction for it, _ in flat],
        [text for _, text in flat],
        [it.rubric if it.rubric is not None else rubric for it, _ in flat],
        [it.reference_answer for it, _ in flat] if any(it.reference_answer for it in items) else None,
        outage=outage,
    )
    all_answered(grades)  # a judge that did not answer measures nothing
    width, score = base + len(names), "expected_score" if expected else "score"
    scores = [[getattr(grades[i * width + k], score) for k in range(width)] for i in range(len(items))]
    baselines = [[v for v in row[:base] if v is not None] for row in scores]
    original = [fmean(b) if b else None for b in baselines]
    ok = [s for s in original if s is not None]
    out: dict[str, Any] = {
        "score": score,
        "baseline_samples": base,
        "n_items": len(items),
        "original_mean": fmean(ok) if ok else None,
        "original_failed": len(original) - len(ok),
        "edits": {},
        "per_item": [
            {"id": it.id, "original": orig, "baseline": row[:base], **dict(zip(names, row[base:], strict=True))}
            for it, row, orig in zip(items, scores, original, strict=True)
        ],
    }
    for k, name in enumerate(names):
        stats = edit_stats(original, [row[base + k] for row in scores], seed=seed + k + 1, resamples=resamples)
        ratio = (
            fmean(len(e[k]) / max(len(it.response), 1) for it, e in zip(items, edited, strict=True)) if items else None
        )
        out["edits"][name] = {"description": data.EDITS.get(name).description, **stats, "mean_length_ratio": ratio}
    return out


def run_probe(
    judge: Judge,
    config: ProbeConfig | None = None,
    *,
    inputs: ProbeInputs | None = None,
    judge_label: str | None = None,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """Run the probe's parts with ``judge`` and return the record ``prom-reward probe`` writes; ``inputs``:
    ``load_inputs(config)``'s (read here when not given); ``outage``: how failed items are asked again."""
    cfg = (config or ProbeConfig()).for_format(judge.format)
    inputs = inputs or load_inputs(cfg, judge.format)
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
        "not_run": {
            p: str(unsupported_task(judge.format, t)) for p, t in PART_TASKS.items() if t not in judge.format.tasks
        },
    }
    common = {"rubric": cfg.rubric, "seed": cfg.seed, "resamples": cfg.resamples, "outage": outage}
    if pairs is not None:
        t = time.perf_counter()
        record["llmbar"] = llmbar_accuracy(judge, pairs, **common)
        record["llmbar"]["seconds"] = time.perf_counter() - t
    if items is not None:
        t = time.perf_counter()
        record["shifts"] = score_shifts(
            judge, items, cfg.edits, expected=cfg.expected, baseline_samples=cfg.baseline_samples, **common
        )
        record["shifts"]["seconds"] = time.perf_counter() - t
    record["seconds"] = time.perf_counter() - start
    record["judge_stats"] = _asdict(judge.stats)
    fmt = judge.format  # what the report names: the format's verdict marker after which verdicts were forced
    record["judge_format"] = {"name": fmt.name, "verdict_marker": (fmt.force_prefix or "").strip() or None}
    return record


def _asdict(value: Any) -> dict[str, Any] | None:
    """A judge's dataclass attribute (sampling, stats) as a dict; None for anything else."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else None
