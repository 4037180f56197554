"""Reading and writing the Feedback / Preference Collection layouts (hub ids or local JSON/JSONL/Parquet).

Feedback Collection rows: the ``orig_*`` columns, else the ready ``instruction`` (a filled absolute
prompt, parsed back) and ``output`` (``feedback [RESULT] k``). Preference Collection rows: ``orig_*``
(``orig_response_A``, ``orig_response_B``, ``orig_preference``, ``orig_feedback``), else ``instruction`` /
``output``. A Feedback Collection read as preferences is turned into pairs, and the pairwise feedback
must then be chosen (``feedback="model"`` with a judge, or ``feedback="concatenate"``).

Example:
    >>> row = {"orig_instruction": "q", "orig_response": "r", "orig_criteria": "Right?", "orig_feedback": "Fine.",
    ...        "orig_score": 4, **{f"orig_score{k}_description": f"level {k}" for k in range(1, 6)}}
    >>> rec = feedback_record_from_row(row)
    >>> rec.rubric.splitlines()[0], rec.completion
    ('[Right?]', 'Fine. [RESULT] 4')
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import (
    AbsolutePromptParts,
    parse_absolute_prompt,
    parse_relative_prompt,
    unicode_problem,
)
from prom_reward.jobs.source import read_rows

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

R = TypeVar("R", FeedbackRecord, PairRecord)
_LOCAL_SUFFIXES = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_FEEDBACK_COLUMNS: tuple[str, ...] = ("orig_response", "orig_criteria", "orig_feedback", "orig_score")
_FEEDBACK_COLUMNS += tuple(f"orig_score{k}_description" for k in range(1, 6))
"""The columns a Feedback Collection row with ``orig_instruction`` must have."""


def _load_rows(source: str, split: str = "train") -> list[dict[str, Any]]:
    """Rows of a local JSON/JSONL/Parquet file (``read_local_rows``) or a hub dataset (through ``datasets``)."""
    path = Path(source)
    if path.suffix.lower() in _LOCAL_SUFFIXES:
        return read_local_rows(path, f"pass a JSON/JSONL/Parquet file or a hub id such as {FEEDBACK_HUB_IDS[0]}")
    import datasets

    return [dict(r) for r in datasets.load_dataset(source, split=split)]


def read_local_rows(path: Path, fix: str, fields: Mapping[str, type] | None = None) -> list[dict[str, Any]]:
    """The rows of a local data file, read as a job reads its input (``prom_reward.jobs.source``: JSON lines, a
    JSON array, Parquet; a UTF-8 BOM, CRLF and blank lines are fine, each value keeps its type, and a bad line
    is an ``InputError`` naming the file and line before anything is trained); an empty file is one too, and so
    is a row without one of ``fields`` (name: type) or with one of another type. A missing file is a
    ``ConfigError`` saying ``fix``."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; {fix}")
    rows = list(read_rows(path))
    if not rows:
        raise InputError(f"{path}: no rows; expected a JSON array of objects, one JSON object per line or Parquet")
    for i, row in enumerate(rows):
        for key, kind in (fields or {}).items():
            if not isinstance(row.get(key), kind):
                raise InputError(
                    f"{path}: row {i}: {key!r} missing or of the wrong type (expected {kind.__name__}); fix the row",
                    index=i,
                    field=key,
                )
    return rows


def _text(row: Mapping[str, Any], key: str, index: int) -> str:
    """The string in column ``key`` of row ``index``; anything else (null, a number, a list) is an error,
    never its ``str()`` (which would train on the text ``None``)."""
    value = row.get(key)
    if not isinstance(value, str):
        raise InputError(
            f"row {index}: {key} must be a string, got {type(value).__name__} {str(value)[:40]!r}; fix the row",
            index=index,
            field=key,
        )
    problem = unicode_problem(value)
    if problem is not None:
        raise InputError(f"row {index}: {key} {problem}; fix the row", index=index, field=key)
    return value


def _opt_ref(row: Mapping[str, Any], index: int, key: str = "orig_reference_answer") -> str | None:
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _text(row, key, index)


def _feedback(row: Mapping[str, Any], index: int) -> str:
    """``orig_feedback`` of a Feedback Collection row: a non-empty string (an empty one would train the
    judge to answer ``[RESULT] k`` with no feedback)."""
    value = _text(row, "orig_feedback", index)
    if not value.strip():
        raise InputError(
            f"row {index}: orig_feedback is empty; the judge learns to write feedback before [RESULT], "
            "so fill it in or remove the row",
            index=index,
            field="orig_feedback",
        )
    return value


def _score(row: Mapping[str, Any], index: int) -> int:
    """``orig_score`` as an int 1..5 (an int, an integral float or a digit string, as the hub files have it)."""
    value = row.get("orig_score")
    if isinstance(value, str) and value.strip() in ("1", "2", "3", "4", "5"):
        return int(value)
    if isinstance(value, float) and value in (1.0, 2.0, 3.0, 4.0, 5.0):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5:
        return value
    raise InputError(
        f"row {index}: orig_score must be an integer 1..5, got {value!r}; fix the row", index=index, field="orig_score"
    )


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


def record_of_prompt(parts: AbsolutePromptParts, feedback: str, score: int, source: str) -> FeedbackRecord:
    """The record of one feedback and score on a filled absolute prompt parsed back (``parts``), from ``source``."""
    return FeedbackRecord(
        parts.instruction, parts.response, parts.reference_answer, parts.rubric, feedback, score, source
    )


def feedback_record_from_row(row: Mapping[str, Any], index: int = 0) -> FeedbackRecord:
    """One Feedback Collection row (``orig_*`` columns, else ``instruction``/``output``) as a record."""
    if "orig_instruction" in row:
        missing = [k for k in _FEEDBACK_COLUMNS if k not in row]
        if missing:
            raise InputError(
                f"row {index}: Feedback Collection columns missing: {', '.join(missing)}", index=index, field=missing[0]
            )
        rubric = Rubric(
            _text(row, "orig_criteria", index).strip().strip("[]"),
            tuple(_text(row, f"orig_score{k}_description", index) for k in range(1, 6)),
        ).format()
        return FeedbackRecord(
            _text(row, "orig_instruction", index),
            _text(row, "orig_response", index),
            _opt_ref(row, index),
            rubric,
            _feedback(row, index),
            _score(row, index),
            _text(row, "orig_instruction", index),
        )
    if "instruction" in row and "output" in row:
        parts = parse_absolute_prompt(_text(row, "instruction", index))
        feedback, score = _split_output(_text(row, "output", index), index, "12345")
        return record_of_prompt(parts, feedback, int(score), parts.instruction)
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
            fb_a, fb_b = _text(row, "orig_feedback_A", index), _text(row, "orig_feedback_B", index)
            fb, src = compose_pair_feedback(fb_a, fb_b, winner), "concatenate"
        else:
            fb = _text(row, "orig_feedback", index)
        return PairRecord(
            _text(row, "orig_instruction", index),
            _text(row, "orig_response_A", index),
            _text(row, "orig_response_B", index),
            _opt_ref(row, index),
            f"[{_text(row, 'orig_criteria', index).strip('[]')}]",
            fb,
            winner,  # type: ignore[arg-type]
            _text(row, "orig_instruction", index),
            src,
        )
    if "instruction" in row and "output" in row:
        parts = parse_relative_prompt(_text(row, "instruction", index))
        feedback, winner = _split_output(_text(row, "output", index), index, "AB")
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
    return _records(source, rows, feedback_record_from_row)


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
        records = _records(source, rows, feedback_record_from_row)
        return build_preference_collection(records, **build)[:limit]
    return _records(source, rows[:limit], pair_record_from_row)


def _records(source: str, rows: list[dict[str, Any]], make: Callable[[Mapping[str, Any], int], R]) -> list[R]:
    """``make(row, i)`` for every row; a bad row's error names the source, the row and the field."""
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(make(row, i))
        except InputError as e:
            msg = str(e) if str(e).startswith(f"row {i}") else f"row {i}: {e}"
            raise InputError(f"{source}: {msg}", index=i, field=e.field) from None
    return out


def save_preference_collection(pairs: Iterable[PairRecord], path: str | Path) -> int:
    """Write pairs as Preference Collection JSONL rows (``orig_*`` plus ``feedback_source``); returns the count.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "pc.jsonl")
    >>> save_preference_collection([PairRecord("q", "a", "b", None, "[c]\\nScore 1: x", "f", "A")], p)
    1
    >>> load_preference_collection(p)[0].rubric
    '[c]'
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.partial")  # a stop midway never leaves a cut file at ``path``
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
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
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def _is_absolute_row(row: Mapping[str, Any]) -> bool:
    out = str(row.get("output", ""))
    m = _RESULT.search(out)
    return bool(m and m.group(1) in "12345")
