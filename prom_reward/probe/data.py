"""The probe's inputs: LLMBar pairs (``load_llmbar``: Natural and the four Adversarial sets) and graded items
(``load_items``: rows, or the Prometheus evaluation layout), in seeded subsets."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prom_reward.core.items import check_text
from prom_reward.errors import InputError, PromRewardError
from prom_reward.format.rubrics import get_rubric
from prom_reward.format.templates import parse_absolute_prompt
from prom_reward.jobs.source import read_rows

LLMBAR_SETS = ("Natural", "Adversarial_Neighbor", "Adversarial_GPTInst", "Adversarial_GPTOut", "Adversarial_Manual")
"""LLMBar's five sets, Natural first (the gaps are measured against it)."""

T = TypeVar("T")


@dataclass(frozen=True)
class ProbeItem:
    """One graded response whose score the edits try to move."""

    id: str
    """The row's ``id``, else its position in the file."""
    instruction: str
    response: str
    reference_answer: str | None = None
    rubric: Any = None
    """The row's rubric (a name, dict or formatted text); None: the probe's ``rubric``."""


@dataclass(frozen=True)
class LLMBarPair:
    """One LLMBar pair: ``label`` names the output that follows the instruction (1 or 2)."""

    set: str
    index: int
    """Position in its set's file."""
    instruction: str
    output_1: str
    output_2: str
    label: int


def checkout_data_dir() -> Path | None:
    """``benchmarks/data`` of the repository this package runs from, or None (an installed wheel ships none)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
    return path if path.is_dir() else None


def seeded_subset(values: list[T], limit: int | None, seed: int) -> list[T]:
    """At most ``limit`` of ``values``, a seeded random choice kept in file order."""
    if limit is None or limit >= len(values):
        return list(values)
    keep = sorted(random.Random(seed).sample(range(len(values)), limit))
    return [values[i] for i in keep]


def _text(row: dict[str, Any], key: str, where: str, index: int) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"{where} row {index}: {key!r} must be a non-empty string, got {value!r:.80}; fix: repair that row or "
            "leave it out",
            index=index,
            field=key,
        )
    try:
        check_text(value, None, repr(key))
    except InputError as e:
        raise InputError(f"{where} row {index}: {e}", index=index, field=key) from None
    return value


def _rubric(row: dict[str, Any], where: str, index: int) -> Any:
    """The row's rubric (None when it has none), checked the way the judge resolves it."""
    value = row.get("rubric")
    if value is not None:
        try:
            get_rubric(value)
        except PromRewardError as e:
            raise InputError(
                f"{where} row {index}: 'rubric' {value!r:.80} is not a rubric ({e}); fix: give a built-in rubric "
                "name, a rubric object or '[criteria]...' text, or leave the column out for --rubric",
                index=index,
                field="rubric",
            ) from None
    return value


def _item(row: dict[str, Any], index: int, where: str) -> ProbeItem:
    ident = str(row.get("id", index))
    if "response" not in row and isinstance(row.get("instruction"), str):
        try:
            parts = parse_absolute_prompt(row["instruction"])
        except InputError as e:
            raise InputError(
                f"{where} row {index}: no 'response' column, and 'instruction' is not a filled "
                f"absolute prompt either ({e}); fix: give rows with instruction and response",
                index=index,
                field="response",
            ) from e
        source = row.get("response_source")
        return ProbeItem(
            f"{row.get('idx', index)}:{source}" if source is not None else ident,
            parts.instruction,
            parts.response,
            parts.reference_answer,
            parts.rubric,
        )
    return ProbeItem(
        ident,
        _text(row, "instruction", where, index),
        _text(row, "response", where, index),
        None if row.get("reference_answer") is None else _text(row, "reference_answer", where, index),
        _rubric(row, where, index),
    )


def load_items(path: str | Path, limit: int | None = None, seed: int = 0) -> list[ProbeItem]:
    """The graded items of ``path`` (every row checked before any is used), a seeded subset of ``limit``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"--items {path}: no such file; fix: give a .jsonl/.json/.parquet file of rows with instruction and "
            "response",
            field="items",
        )
    items = [_item(row, i, str(p)) for i, row in enumerate(read_rows(p))]
    if not items:
        raise InputError(
            f"--items {path}: the file has no rows; fix: give a file of rows with instruction and response",
            field="items",
        )
    return seeded_subset(items, limit, seed)


def load_llmbar(folder: str | Path, limit: int | None = None, seed: int = 0) -> dict[str, list[LLMBarPair]]:
    """``{set name: pairs}`` of ``LLMBAR_SETS`` from an LLMBar folder (all checked first), ``limit`` per set at most."""
    out: dict[str, list[LLMBarPair]] = {}
    for name in LLMBAR_SETS:
        path = Path(folder) / f"{name}.json"
        if not path.is_file():
            raise InputError(
                f"--llmbar {folder}: {path.name} is missing; fix: give a folder with "
                f"{', '.join(s + '.json' for s in LLMBAR_SETS)} (princeton-nlp/LLMBar)",
                field="llmbar",
            )
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, too deep or long a number
            raise _damaged(f"{path}: not valid JSON ({type(e).__name__}: {e})", field="llmbar") from None
        if not isinstance(records, list) or not records:
            raise _damaged(f"{path}: expected a non-empty JSON list of pairs", field="llmbar")
        pairs = []
        for i, rec in enumerate(records):
            if not isinstance(rec, dict):
                raise _damaged(f"{path} record {i}: expected an object, got {type(rec).__name__}", index=i)
            texts = [_text(rec, k, str(path), i) for k in ("input", "output_1", "output_2")]
            if rec.get("label") not in (1, 2) or isinstance(rec.get("label"), bool):
                raise _damaged(
                    f"{path} record {i}: label must be 1 or 2, got {rec.get('label')!r}", index=i, field="label"
                )
            pairs.append(LLMBarPair(name, i, texts[0], texts[1], texts[2], rec["label"]))
        out[name] = seeded_subset(pairs, limit, seed)
    return out


def _damaged(problem: str, **where: Any) -> InputError:
    return InputError(f"{problem}; fix: restore the file from LLMBar", **where)
