"""Reading and writing the Feedback / Preference Collection layouts (hub ids or local JSON/JSONL/Parquet).

Feedback Collection rows: the ``orig_*`` columns, else the ready ``instruction`` (a filled absolute
prompt, parsed back) and ``output`` (``feedback [RESULT] k``). Preference Collection rows: ``orig_*``
(``orig_response_A``, ``orig_response_B``, ``orig_preference``, ``orig_feedback``), else ``instruction`` /
``output``. A Feedback Collection read as preferences is turned into pairs, and the pairwise feedback
must then be chosen (``feedback="model"`` with a judge, or ``feedback="concatenate"``). Everything here
is re-exported by ``train_judge.data``.

Example:
    >>> row = {"orig_instruction": "q", "orig_response": "r", "orig_criteria": "Right?", "orig_feedback": "Fine.",
    ...        "orig_score": 4, **{f"orig_score{k}_description": f"level {k}" for k in range(1, 6)}}
    >>> rec = feedback_record_from_row(row)
    >>> rec.rubric.splitlines()[0], rec.completion
    ('[Right?]', 'Fine. [RESULT] 4')
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import parse_absolute_prompt, parse_relative_prompt

from .data import (
    _CHOOSE,
    _RESULT,
    FEEDBACK_HUB_IDS,
    PREFERENCE_HUB_IDS,
    FeedbackRecord,
    PairRecord,
    build_preference_collection,
    compose_pair_feedback,
)

_LOCAL_SUFFIXES = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def _load_rows(source: str, split: str = "train") -> list[dict[str, Any]]:
    """Rows of a local JSON/JSONL/Parquet file or a hub dataset, through ``datasets``."""
    import datasets

    path = Path(source)
    if path.suffix.lower() in _LOCAL_SUFFIXES:
        if not path.is_file():
            raise ConfigError(
                f"data file {source} does not exist; pass a JSON/JSONL/Parquet file or a hub id "
                f"such as {FEEDBACK_HUB_IDS[0]}"
            )
        ds = datasets.load_dataset(_LOCAL_SUFFIXES[path.suffix.lower()], data_files=str(path), split="train")
    else:
        ds = datasets.load_dataset(source, split=split)
    return [dict(r) for r in ds]


def _opt_ref(value: Any) -> str | None:
    return None if value is None or (isinstance(value, str) and not value.strip()) else str(value)


def _split_output(output: str, row: int, verdicts: str) -> tuple[str, str]:
    m = _RESULT.search(output)
    if not m or m.group(1) not in verdicts:
        raise InputError(
            f"row {row}: 'output' must end with '[RESULT] <{'|'.join(verdicts)}>', got "
            f"...{output[-60:]!r}; fix the row or use the orig_* columns",
            index=row,
            field="output",
        )
    return output[: m.start()].rstrip(), m.group(1)


def feedback_record_from_row(row: Mapping[str, Any], index: int = 0) -> FeedbackRecord:
    """One Feedback Collection row (``orig_*`` columns, else ``instruction``/``output``) as a record."""
    if "orig_instruction" in row:
        missing = [
            k
            for k in (
                "orig_response",
                "orig_criteria",
                "orig_feedback",
                "orig_score",
                *(f"orig_score{k}_description" for k in range(1, 6)),
            )
            if k not in row
        ]
        if missing:
            raise InputError(
                f"row {index}: Feedback Collection columns missing: {', '.join(missing)}", index=index, field=missing[0]
            )
        rubric = Rubric(
            str(row["orig_criteria"]).strip().strip("[]"),
            tuple(str(row[f"orig_score{k}_description"]) for k in range(1, 6)),
        ).format()
        return FeedbackRecord(
            str(row["orig_instruction"]),
            str(row["orig_response"]),
            _opt_ref(row.get("orig_reference_answer")),
            rubric,
            str(row["orig_feedback"]),
            int(row["orig_score"]),
            str(row["orig_instruction"]),
        )
    if "instruction" in row and "output" in row:
        parts = parse_absolute_prompt(str(row["instruction"]))
        feedback, score = _split_output(str(row["output"]), index, "12345")
        return FeedbackRecord(
            parts.instruction,
            parts.response,
            parts.reference_answer,
            parts.rubric,
            feedback,
            int(score),
            parts.instruction,
        )
    raise InputError(
        f"row {index} has neither the orig_* Feedback Collection columns nor 'instruction'/'output' "
        f"(columns: {', '.join(sorted(row))})",
        index=index,
    )


def pair_record_from_row(row: Mapping[str, Any], index: int = 0) -> PairRecord:
    """One Preference Collection row (``orig_*`` columns, else ``instruction``/``output``) as a record."""
    if "orig_instruction" in row and "orig_response_A" in row:
        winner = str(row.get("orig_preference", "")).strip()
        if winner not in ("A", "B"):
            raise InputError(
                f"row {index}: orig_preference must be 'A' or 'B', got {winner!r}", index=index, field="orig_preference"
            )
        fb, src = row.get("orig_feedback"), str(row.get("feedback_source") or "given")
        if not fb:  # a row without a pairwise feedback: its absolute feedbacks joined, and labelled so
            fb, src = (
                compose_pair_feedback(str(row.get("orig_feedback_A", "")), str(row.get("orig_feedback_B", "")), winner),
                "concatenate",
            )
        return PairRecord(
            str(row["orig_instruction"]),
            str(row["orig_response_A"]),
            str(row["orig_response_B"]),
            _opt_ref(row.get("orig_reference_answer")),
            f"[{str(row['orig_criteria']).strip('[]')}]",
            str(fb),
            winner,  # type: ignore[arg-type]
            str(row["orig_instruction"]),
            src,
        )
    if "instruction" in row and "output" in row:
        parts = parse_relative_prompt(str(row["instruction"]))
        feedback, winner = _split_output(str(row["output"]), index, "AB")
        return PairRecord(
            parts.instruction,
            parts.response_a,
            parts.response_b,
            parts.reference_answer,
            parts.rubric,
            feedback,
            winner,  # type: ignore[arg-type]
            parts.instruction,
        )
    raise InputError(
        f"row {index} has neither the orig_* Preference Collection columns nor 'instruction'/'output' "
        f"(columns: {', '.join(sorted(row))})",
        index=index,
    )


def load_feedback_collection(
    source: str = FEEDBACK_HUB_IDS[0], *, split: str = "train", limit: int | None = None
) -> list[FeedbackRecord]:
    """Feedback records from a hub id or a local JSON/JSONL/Parquet file (first ``limit`` rows)."""
    rows = _load_rows(source, split)[:limit]
    return [feedback_record_from_row(r, i) for i, r in enumerate(rows)]


def load_preference_collection(
    source: str = PREFERENCE_HUB_IDS[0], *, split: str = "train", limit: int | None = None, **build: Any
) -> list[PairRecord]:
    """Pair records from a Preference Collection hub id or local file; a Feedback Collection source
    (its hub id, or a file with ``orig_score``/absolute ``output`` rows) is turned into pairs by
    ``build_preference_collection(records, **build)``, which needs ``feedback="model"`` (with
    ``judge=``) or ``feedback="concatenate"``."""
    rows = _load_rows(source, split)
    if source in FEEDBACK_HUB_IDS or (rows and ("orig_score" in rows[0] or _is_absolute_row(rows[0]))):
        if build.get("feedback") is None:
            raise ConfigError(
                f"{source} is a Feedback Collection: its pairs need a pairwise feedback; pass "
                f"feedback=... to load_preference_collection, or build and save them first "
                f"(build_preference_collection + save_preference_collection) and train on that "
                f"file; {_CHOOSE}"
            )
        records = [feedback_record_from_row(r, i) for i, r in enumerate(rows)]
        return build_preference_collection(records, **build)[:limit]
    return [pair_record_from_row(r, i) for i, r in enumerate(rows[:limit])]


def save_preference_collection(pairs: Iterable[PairRecord], path: str | Path) -> int:
    """Write pairs as Preference Collection JSONL rows (``orig_*`` plus ``feedback_source``); returns the count.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "pc.jsonl")
    >>> save_preference_collection([PairRecord("q", "a", "b", None, "[c]\\nScore 1: x", "f", "A")], p)
    1
    >>> load_preference_collection(p)[0].rubric
    '[c]'
    """
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            criteria = p.rubric.strip().splitlines()[0].strip().strip("[]") if p.rubric.strip() else ""
            f.write(
                json.dumps(
                    {
                        "orig_instruction": p.instruction,
                        "orig_response_A": p.response_a,
                        "orig_response_B": p.response_b,
                        "orig_reference_answer": p.reference_answer or "",
                        "orig_criteria": criteria,
                        "orig_feedback": p.feedback,
                        "orig_preference": p.winner,
                        "feedback_source": p.feedback_source,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
            n += 1
    return n


def _is_absolute_row(row: Mapping[str, Any]) -> bool:
    out = str(row.get("output", ""))
    m = _RESULT.search(out)
    return bool(m and m.group(1) in "12345")
