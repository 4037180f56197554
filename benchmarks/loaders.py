"""Benchmark loaders: the published Prometheus meta-evaluation layouts, and named benchmarks.

Layouts (``LAYOUTS``; pass any file with ``layout=``):

- ``absolute``: a JSON list of records with ``instruction`` (a filled absolute prompt, with or without
  reference answer) and ``gpt4_score`` (a list of reference scores, or one int as in Feedback Bench);
  optional ``category``, ``idx``, ``response_source``. Vicuna Bench, MT-Bench, FLASK, Feedback Bench.
- ``chosen_rejected``: records with ``chosen_instruction`` and ``rejected_instruction`` (two filled
  absolute prompts that differ only in the response), optional ``source`` and ``tie`` (1 = tie).
  HHH Alignment, MT-Bench human judgments, Preference Bench.
- ``autoj``: JSON lines with ``prompt``, ``response 1``, ``response 2``, ``label`` (0: response 1 better,
  1: response 2 better, 2: tie) and ``scenario``. Auto-J pairwise. The files carry no rubric: the
  ``rubric`` argument (default the built-in helpfulness rubric) is used.

Named benchmarks (``BENCHES``) resolve to files in ``benchmarks/data/`` (copied into the repository with
their origin and license: ``benchmarks/data/README.md``); any other file path works with ``layout=``.

Example:
    >>> from prom_reward.format.render import render_absolute
    >>> recs = [{"instruction": render_absolute("2+2?", "4", "helpfulness", "4"), "gpt4_score": [5, 4, 5]}]
    >>> ex = parse_absolute_records(recs)[0]
    >>> (ex.response, ex.reference_score, ex.category)
    ('4', 4.666666666666667, 'all')
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.errors import InputError
from prom_reward.format.templates import parse_absolute_prompt
from prom_reward.registry import Registry


@dataclass(frozen=True)
class AbsoluteExample:
    """One response with reference scores."""

    id: str
    """Stable item id (``idx`` and response source when present, else the position)."""
    instruction: str
    """The instruction the response answers."""
    response: str
    """The graded response."""
    rubric: str
    """The score rubric text as it appeared in the prompt."""
    reference_answer: str | None
    """The score-5 reference answer, or None."""
    ref_scores: tuple[float, ...]
    """Reference scores (e.g. three GPT-4 grades)."""
    category: str = "all"
    """Category for per-category breakdowns."""
    group: str = ""
    """Items with the same group share an instruction (used for transitivity triples)."""

    @property
    def reference_score(self) -> float:
        """The mean reference score (what the papers correlate against)."""
        return sum(self.ref_scores) / len(self.ref_scores)


@dataclass(frozen=True)
class PairExample:
    """Two responses to one instruction with a human/GPT-4 label."""

    id: str
    """Stable item id."""
    instruction: str
    """The instruction both responses answer."""
    response_1: str
    """First response."""
    response_2: str
    """Second response."""
    label: str
    """``"1"`` (response 1 better), ``"2"`` or ``"tie"``."""
    rubric: str
    """Rubric text (absolute form, with score descriptions, so Direct2Pair can grade)."""
    reference_answer: str | None = None
    """Reference answer, or None."""
    category: str = "all"
    """Category for per-category breakdowns (Auto-J scenario, HHH source)."""


Example = AbsoluteExample | PairExample


def _need(rec: Any, keys: Sequence[str], i: int, layout: str) -> None:
    if not isinstance(rec, dict):
        raise InputError(f"{layout} record {i}: expected a JSON object, got {type(rec).__name__}", index=i)
    for k in keys:
        if k not in rec:
            raise InputError(
                f"{layout} record {i}: missing field {k!r} (has {sorted(rec)}); is the layout "
                f"right? valid layouts: {', '.join(LAYOUTS.names())}",
                index=i,
                field=k,
            )


def parse_absolute_records(records: Sequence[Any], rubric: str | None = None) -> list[AbsoluteExample]:
    """``absolute`` layout -> examples (the filled prompt is split back into its parts)."""
    out = []
    for i, rec in enumerate(records):
        _need(rec, ("instruction", "gpt4_score"), i, "absolute")
        parts = parse_absolute_prompt(rec["instruction"])
        scores = rec["gpt4_score"] if isinstance(rec["gpt4_score"], list) else [rec["gpt4_score"]]
        if not scores or not all(isinstance(s, (int, float)) for s in scores):
            raise InputError(
                f"absolute record {i}: gpt4_score must be a number or a non-empty list of numbers, "
                f"got {rec['gpt4_score']!r}",
                index=i,
                field="gpt4_score",
            )
        idx = rec.get("idx", i)
        src = rec.get("response_source")
        out.append(
            AbsoluteExample(
                id=f"{idx}:{src}" if src is not None else str(i),
                instruction=parts.instruction,
                response=parts.response,
                rubric=parts.rubric,
                reference_answer=parts.reference_answer,
                ref_scores=tuple(float(s) for s in scores),
                category=str(rec.get("category", "all")),
                group=str(idx) if src is not None else str(i),
            )
        )
    return out


def parse_chosen_rejected_records(records: Sequence[Any], rubric: str | None = None) -> list[PairExample]:
    """``chosen_rejected`` layout -> examples (response 1 = chosen, label "1" unless ``tie`` is 1)."""
    out = []
    for i, rec in enumerate(records):
        _need(rec, ("chosen_instruction", "rejected_instruction"), i, "chosen_rejected")
        c, r = parse_absolute_prompt(rec["chosen_instruction"]), parse_absolute_prompt(rec["rejected_instruction"])
        if (c.instruction, c.rubric) != (r.instruction, r.rubric):
            raise InputError(
                f"chosen_rejected record {i}: chosen and rejected prompts differ in more than the "
                "response (instruction or rubric); they must judge the same task",
                index=i,
            )
        out.append(
            PairExample(
                id=str(i),
                instruction=c.instruction,
                response_1=c.response,
                response_2=r.response,
                label="tie" if rec.get("tie") == 1 else "1",
                rubric=c.rubric,
                reference_answer=c.reference_answer,
                category=str(rec.get("source", "all")),
            )
        )
    return out


def parse_autoj_records(records: Sequence[Any], rubric: str | None = None) -> list[PairExample]:
    """``autoj`` layout -> examples; labels 0/1/2 become "1"/"2"/"tie"."""
    from prom_reward.format.rubrics import get_rubric

    text = get_rubric(rubric or "helpfulness").format()
    out = []
    for i, rec in enumerate(records):
        _need(rec, ("prompt", "response 1", "response 2", "label"), i, "autoj")
        label = {0: "1", 1: "2", 2: "tie"}.get(int(rec["label"]) if str(rec["label"]).isdigit() else -1)
        if label is None:
            raise InputError(f"autoj record {i}: label must be 0, 1 or 2, got {rec['label']!r}", index=i, field="label")
        out.append(
            PairExample(
                id=str(i),
                instruction=rec["prompt"],
                response_1=rec["response 1"].strip(),
                response_2=rec["response 2"].strip(),
                label=label,
                rubric=text,
                category=str(rec.get("scenario", "all")),
            )
        )
    return out


LAYOUTS: Registry[Callable[..., list[Any]]] = Registry("benchmark layout")
LAYOUTS.register("absolute", parse_absolute_records)
LAYOUTS.register("chosen_rejected", parse_chosen_rejected_records)
LAYOUTS.register("autoj", parse_autoj_records)

BENCHES: Registry[tuple[str, str]] = Registry("benchmark")
"""Name -> (file name in ``DATA_DIR``, layout); vicuna and autoj ship, the others are looked for there."""
for _name, _file, _layout in (
    ("vicuna", "vicuna_eval.json", "absolute"),
    ("mt_bench", "mt_bench_eval.json", "absolute"),
    ("flask", "flask_eval.json", "absolute"),
    ("feedback_bench", "feedback_collection_ood_test.json", "absolute"),
    ("autoj", "autoj_pairwise.jsonl", "autoj"),
    ("hhh", "hhh_alignment_eval.json", "chosen_rejected"),
    ("mt_bench_human", "mt_bench_human_judgement_eval.json", "chosen_rejected"),
    ("preference_bench", "preference_collection_ood_test.json", "chosen_rejected"),
):
    BENCHES.register(_name, (_file, _layout))


DATA_DIR = Path(__file__).resolve().parent / "data"
"""``benchmarks/data/``: the benchmark files shipped with the repository."""


def read_records(path: Path) -> list[Any]:
    """A JSON array file or JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_bench(bench: str, *, layout: str | None = None, rubric: str | None = None) -> tuple[str, list[Example]]:
    """(layout name, examples) for a named benchmark or a file path (then ``layout`` is required)."""
    if bench in BENCHES and layout is None:
        fname, layout = BENCHES.get(bench)
        path = DATA_DIR / fname
        if not path.is_file():
            raise InputError(
                f"benchmark {bench!r} expects {path}, which is not shipped with the repository; "
                f"put the file (from the Prometheus eval data) there, or pass its path with layout=",
                field="bench",
            )
    else:
        path = Path(bench)
        if not path.is_file():
            raise InputError(
                f"benchmark {bench!r} is neither a known name ({', '.join(BENCHES.names())}) nor a file", field="bench"
            )
        if layout is None:
            raise InputError(
                f"{bench}: a benchmark file needs layout= (one of {', '.join(LAYOUTS.names())})", field="layout"
            )
    return layout, LAYOUTS.get(layout)(read_records(path), rubric)


def subset(examples: Sequence[Example], limit: int | None, seed: int = 0) -> list[Example]:
    """At most ``limit`` examples, chosen reproducibly: whole instruction groups (absolute benches keep
    every response of an instruction together, for transitivity) in a seeded random order.

    >>> [e.id for e in subset([PairExample(str(i), "q", "a", "b", "1", "[r]") for i in range(5)], 2, seed=1)]
    ['2', '3']
    """
    if limit is None or limit >= len(examples):
        return list(examples)
    groups: dict[str, list[Example]] = {}
    for e in examples:
        groups.setdefault(getattr(e, "group", "") or e.id, []).append(e)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    out: list[Example] = []
    for g in order:
        out.extend(groups[g][: limit - len(out)])
        if len(out) >= limit:
            break
    return out
