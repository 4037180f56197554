"""Judge training data: Feedback Collection records, and Preference Collection pairs built from them.

Two record kinds, both plain frozen dataclasses:

- ``FeedbackRecord``: one absolute-grading example (instruction, response, optional reference, the
  formatted score rubric, feedback text, score 1..5). ``load_feedback_collection`` reads the Feedback
  Collection layout (``orig_instruction, orig_response, orig_reference_answer, orig_criteria,
  orig_score1_description..orig_score5_description, orig_feedback, orig_score``, or the ready
  ``instruction`` / ``output`` columns: a filled absolute prompt and ``feedback [RESULT] k``) from a hub id
  (``prometheus-eval/Feedback-Collection``, ``kaist-ai/Feedback-Collection``) or a local
  JSON/JSONL/Parquet file, through ``datasets``.
- ``PairRecord``: one pairwise example (two responses, the winner "A"/"B", the pairwise feedback).
  ``build_preference_collection`` makes them from feedback records: for each instruction, every pair of
  its responses with different scores; the higher score wins; placements alternate so the "A" and "B"
  verdicts are equally frequent (they differ by at most one when the count is odd).
  ``load_preference_collection`` reads the Preference Collection layout directly.

Pairwise feedback fallback: when no pairwise feedback column exists, the feedback is composed from the
two absolute feedbacks as ``"Response A: {feedback A} Response B: {feedback B} Response {W} is better
on this criteria."`` (see ``compose_pair_feedback``), so the verdict follows its reasons.

Example:
    >>> recs = [FeedbackRecord("q", r, None, "[c]\\nScore 1: a\\nScore 2: b\\nScore 3: c\\nScore 4: d\\nScore 5: e",
    ...                        f"fb{s}", s) for r, s in (("x", 1), ("y", 3), ("z", 5))]
    >>> pairs = build_preference_collection(recs)
    >>> len(pairs), sorted(p.winner for p in pairs)
    (3, ['A', 'A', 'B'])
    >>> pairs[0].feedback.endswith("Response A is better on this criteria.")
    True
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from prom_reward.errors import ConfigError, InputError
from prom_reward.prompts import parse_absolute_prompt, parse_relative_prompt
from prom_reward.rubrics import Rubric

FEEDBACK_HUB_IDS = ("prometheus-eval/Feedback-Collection", "kaist-ai/Feedback-Collection")
"""Hub ids read as the Feedback Collection layout."""
PREFERENCE_HUB_IDS = ("prometheus-eval/Preference-Collection", "kaist-ai/Preference-Collection")
"""Hub ids read as the Preference Collection layout."""

_LOCAL_SUFFIXES = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_RESULT = re.compile(r"\s*\[RESULT\]\s*([1-5AB])\s*$")


@dataclass(frozen=True)
class FeedbackRecord:
    """One absolute-grading training example."""

    instruction: str
    """The task the response answers."""
    response: str
    """The graded response."""
    reference_answer: str | None
    """A score-5 reference answer, or None (the without-reference template is used)."""
    rubric: str
    """The formatted score rubric (``[criteria]\\nScore 1: ...``)."""
    feedback: str
    """The judge's feedback text, without the ``[RESULT]`` marker."""
    score: int
    """The score 1..5."""
    group: str = ""
    """What identifies the instruction (pairs are built within a group; splits never cross groups)."""

    def __post_init__(self) -> None:
        if isinstance(self.score, bool) or not isinstance(self.score, int) or not 1 <= self.score <= 5:
            raise InputError(f"score must be an int 1..5, got {self.score!r}; fix the record of "
                             f"instruction {self.instruction[:50]!r}", field="score")
        for name in ("instruction", "response", "rubric", "feedback"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{name} must be a str, got {type(getattr(self, name)).__name__}", field=name)

    @property
    def completion(self) -> str:
        """The judge output to train on: ``feedback [RESULT] k``."""
        return f"{self.feedback.strip()} [RESULT] {self.score}"


@dataclass(frozen=True)
class PairRecord:
    """One pairwise-ranking training example."""

    instruction: str
    """The task both responses answer."""
    response_a: str
    """Response A."""
    response_b: str
    """Response B."""
    reference_answer: str | None
    """A reference answer, or None."""
    rubric: str
    """The rubric; only its ``[criteria]`` line reaches the relative prompt."""
    feedback: str
    """The pairwise feedback, without the ``[RESULT]`` marker."""
    winner: Literal["A", "B"]
    """The better response."""
    group: str = ""
    """The instruction's group id."""

    def __post_init__(self) -> None:
        if self.winner not in ("A", "B"):
            raise InputError(f"winner must be 'A' or 'B', got {self.winner!r}", field="winner")

    @property
    def completion(self) -> str:
        """The judge output to train on: ``feedback [RESULT] A|B``."""
        return f"{self.feedback.strip()} [RESULT] {self.winner}"


def compose_pair_feedback(feedback_a: str, feedback_b: str, winner: str) -> str:
    """The fallback pairwise feedback built from two absolute feedbacks.

    >>> compose_pair_feedback("Short.", "Thorough.", "B")
    'Response A: Short. Response B: Thorough. Response B is better on this criteria.'
    """
    return f"Response A: {feedback_a.strip()} Response B: {feedback_b.strip()} Response {winner} is better on this criteria."


def build_preference_collection(records: Sequence[FeedbackRecord], *, scores: Sequence[float] | None = None,
                                pair_feedback: Mapping[tuple[int, int], str] | None = None) -> list[PairRecord]:
    """All pairs with different scores within each group (instruction); the higher score wins.

    ``scores`` replaces the records' own scores for the comparison (e.g. a mean of several graders).

    Groups are taken in first-seen order, pairs in index order; the winner is placed at "A" for the
    1st, 3rd, ... pair overall and at "B" for the others, so the verdict counts differ by at most one.
    ``pair_feedback`` maps ``(i, j)`` record indices (winner first) to a ready pairwise feedback;
    pairs without one get ``compose_pair_feedback``.
    """
    if scores is not None and len(scores) != len(records):
        raise InputError(f"scores has {len(scores)} entries for {len(records)} records; pass one per record",
                         field="scores")
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.group or r.instruction, []).append(i)
    out: list[PairRecord] = []
    for idxs in groups.values():
        for i, j in itertools.combinations(idxs, 2):
            ri = records[i]
            si, sj = (scores[i], scores[j]) if scores is not None else (ri.score, records[j].score)
            if si == sj:
                continue
            win, lose = (i, j) if si > sj else (j, i)
            rw, rl = records[win], records[lose]
            winner_at_a = len(out) % 2 == 0
            a, b = (rw, rl) if winner_at_a else (rl, rw)
            w: Literal["A", "B"] = "A" if winner_at_a else "B"
            fb = (pair_feedback or {}).get((win, lose)) or compose_pair_feedback(a.feedback, b.feedback, w)
            out.append(PairRecord(ri.instruction, a.response, b.response, ri.reference_answer, ri.rubric,
                                  fb, w, ri.group))
    return out


# -- reading the hub / file layouts ------------------------------------------------------------------
def _load_rows(source: str, split: str = "train") -> list[dict[str, Any]]:
    """Rows of a local JSON/JSONL/Parquet file or a hub dataset, through ``datasets``."""
    import datasets

    path = Path(source)
    if path.suffix.lower() in _LOCAL_SUFFIXES:
        if not path.is_file():
            raise ConfigError(f"data file {source} does not exist; pass a JSON/JSONL/Parquet file or a hub id "
                              f"such as {FEEDBACK_HUB_IDS[0]}")
        ds = datasets.load_dataset(_LOCAL_SUFFIXES[path.suffix.lower()], data_files=str(path), split="train")
    else:
        ds = datasets.load_dataset(source, split=split)
    return [dict(r) for r in ds]


def _opt_ref(value: Any) -> str | None:
    return None if value is None or (isinstance(value, str) and not value.strip()) else str(value)


def _split_output(output: str, row: int, verdicts: str) -> tuple[str, str]:
    m = _RESULT.search(output)
    if not m or m.group(1) not in verdicts:
        raise InputError(f"row {row}: 'output' must end with '[RESULT] <{'|'.join(verdicts)}>', got "
                         f"...{output[-60:]!r}; fix the row or use the orig_* columns", index=row, field="output")
    return output[: m.start()].rstrip(), m.group(1)


def feedback_record_from_row(row: Mapping[str, Any], index: int = 0) -> FeedbackRecord:
    """One Feedback Collection row (``orig_*`` columns, else ``instruction``/``output``) as a record."""
    if "orig_instruction" in row:
        missing = [k for k in ("orig_response", "orig_criteria", "orig_feedback", "orig_score",
                               *(f"orig_score{k}_description" for k in range(1, 6))) if k not in row]
        if missing:
            raise InputError(f"row {index}: Feedback Collection columns missing: {', '.join(missing)}",
                             index=index, field=missing[0])
        rubric = Rubric(str(row["orig_criteria"]).strip().strip("[]"),
                        tuple(str(row[f"orig_score{k}_description"]) for k in range(1, 6))).format()
        return FeedbackRecord(str(row["orig_instruction"]), str(row["orig_response"]),
                              _opt_ref(row.get("orig_reference_answer")), rubric, str(row["orig_feedback"]),
                              int(row["orig_score"]), str(row["orig_instruction"]))
    if "instruction" in row and "output" in row:
        parts = parse_absolute_prompt(str(row["instruction"]))
        feedback, score = _split_output(str(row["output"]), index, "12345")
        return FeedbackRecord(parts.instruction, parts.response, parts.reference_answer, parts.rubric,
                              feedback, int(score), parts.instruction)
    raise InputError(f"row {index} has neither the orig_* Feedback Collection columns nor 'instruction'/'output' "
                     f"(columns: {', '.join(sorted(row))})", index=index)


def pair_record_from_row(row: Mapping[str, Any], index: int = 0) -> PairRecord:
    """One Preference Collection row (``orig_*`` columns, else ``instruction``/``output``) as a record."""
    if "orig_instruction" in row and "orig_response_A" in row:
        winner = str(row.get("orig_preference", "")).strip()
        if winner not in ("A", "B"):
            raise InputError(f"row {index}: orig_preference must be 'A' or 'B', got {winner!r}", index=index,
                             field="orig_preference")
        fb = row.get("orig_feedback") or compose_pair_feedback(str(row.get("orig_feedback_A", "")),
                                                               str(row.get("orig_feedback_B", "")), winner)
        return PairRecord(str(row["orig_instruction"]), str(row["orig_response_A"]), str(row["orig_response_B"]),
                          _opt_ref(row.get("orig_reference_answer")), f"[{str(row['orig_criteria']).strip('[]')}]",
                          str(fb), winner, str(row["orig_instruction"]))  # type: ignore[arg-type]
    if "instruction" in row and "output" in row:
        parts = parse_relative_prompt(str(row["instruction"]))
        feedback, winner = _split_output(str(row["output"]), index, "AB")
        return PairRecord(parts.instruction, parts.response_a, parts.response_b, parts.reference_answer,
                          parts.rubric, feedback, winner, parts.instruction)  # type: ignore[arg-type]
    raise InputError(f"row {index} has neither the orig_* Preference Collection columns nor 'instruction'/'output' "
                     f"(columns: {', '.join(sorted(row))})", index=index)


def load_feedback_collection(source: str = FEEDBACK_HUB_IDS[0], *, split: str = "train",
                             limit: int | None = None) -> list[FeedbackRecord]:
    """Feedback records from a hub id or a local JSON/JSONL/Parquet file (first ``limit`` rows)."""
    rows = _load_rows(source, split)[:limit]
    return [feedback_record_from_row(r, i) for i, r in enumerate(rows)]


def load_preference_collection(source: str = PREFERENCE_HUB_IDS[0], *, split: str = "train",
                               limit: int | None = None) -> list[PairRecord]:
    """Pair records from a Preference Collection hub id or local file; a Feedback Collection source
    (its hub id, or a file with ``orig_score``/absolute ``output`` rows) is turned into pairs."""
    rows = _load_rows(source, split)
    if source in FEEDBACK_HUB_IDS or (rows and ("orig_score" in rows[0] or _is_absolute_row(rows[0]))):
        return build_preference_collection([feedback_record_from_row(r, i) for i, r in enumerate(rows)])[:limit]
    return [pair_record_from_row(r, i) for i, r in enumerate(rows[:limit])]


def _is_absolute_row(row: Mapping[str, Any]) -> bool:
    out = str(row.get("output", ""))
    m = _RESULT.search(out)
    return bool(m and m.group(1) in "12345")


def records_summary(records: Iterable[FeedbackRecord | PairRecord]) -> dict[str, int]:
    """Counts of verdicts (``"1"``..``"5"``, ``"A"``, ``"B"``) over records.

    >>> records_summary([PairRecord("q", "a", "b", None, "[c]", "f", "A")])
    {'A': 1}
    """
    counts: dict[str, int] = {}
    for r in records:
        key = str(r.score) if isinstance(r, FeedbackRecord) else r.winner
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))
