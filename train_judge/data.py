"""Judge training data: Feedback Collection records, and Preference Collection pairs built from them.

Two record kinds, both plain frozen dataclasses:

- ``FeedbackRecord``: one absolute-grading example (instruction, response, optional reference, the
  formatted score rubric, feedback text, score 1..5). ``load_feedback_collection`` reads the Feedback
  Collection layout (``orig_instruction, orig_response, orig_reference_answer, orig_criteria,
  orig_score1_description..orig_score5_description, orig_feedback, orig_score``, or the ready
  ``instruction`` / ``output`` columns: a filled absolute prompt and ``feedback [RESULT] k``) from a hub id
  (``prometheus-eval/Feedback-Collection``, ``kaist-ai/Feedback-Collection``) or a local
  JSON/JSONL/Parquet file, through ``datasets``.
- ``PairRecord``: one pairwise example (two responses, the winner "A"/"B", the pairwise feedback and
  where it came from). ``build_preference_collection`` makes them from feedback records: for each
  instruction, every pair of its responses with different scores; the higher score wins; placements
  alternate so the "A" and "B" verdicts are equally frequent (they differ by at most one when the count
  is odd). ``load_preference_collection`` reads the Preference Collection layout directly;
  ``save_preference_collection`` writes it (JSONL).

Pairwise feedback of a Preference Collection built from a Feedback Collection: it must be chosen
(``feedback=``), never defaulted. ``"model"``: a judge writes feedback comparing the two responses
(Prometheus 2, section 3.3; see ``train_judge.comparative``), verdict checked against the label.
``"concatenate"``: the labelled fallback, the two absolute feedbacks joined as ``"Response A: {feedback A}
Response B: {feedback B} Response {W} is better on this criteria."`` (``compose_pair_feedback``). Each
``PairRecord.feedback_source`` says which (``model``, ``concatenate``, or ``given``: a column or
``pair_feedback=``).

Example:
    >>> recs = [FeedbackRecord("q", r, None, "[c]\\nScore 1: a\\nScore 2: b\\nScore 3: c\\nScore 4: d\\nScore 5: e",
    ...                        f"fb{s}", s) for r, s in (("x", 1), ("y", 3), ("z", 5))]
    >>> pairs = build_preference_collection(recs, feedback="concatenate")
    >>> len(pairs), sorted(p.winner for p in pairs), pairs[0].feedback_source
    (3, ['A', 'A', 'B'], 'concatenate')
    >>> pairs[0].feedback.endswith("Response A is better on this criteria.")
    True
"""

from __future__ import annotations

import itertools
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Union

from prom_reward.errors import ConfigError, InputError

if TYPE_CHECKING:
    from prom_reward.backends.base import Backend
    from prom_reward.backends.store import JudgmentStore
    from prom_reward.core.judge import PrometheusJudge

    from .comparative import ComparativeWriter

Judges = Union["PrometheusJudge", "Backend", "ComparativeWriter"]
"""What writes comparative feedback: a judge, a backend with ``generate``, or a ``ComparativeWriter``."""

FEEDBACK_HUB_IDS = ("prometheus-eval/Feedback-Collection", "kaist-ai/Feedback-Collection")
"""Hub ids read as the Feedback Collection layout."""
PREFERENCE_HUB_IDS = ("prometheus-eval/Preference-Collection", "kaist-ai/Preference-Collection")
"""Hub ids read as the Preference Collection layout."""

FEEDBACK_MODES = ("model", "concatenate")
"""How pairwise feedback is made from two absolute feedbacks (``build_preference_collection(feedback=)``)."""
ON_FAILURE = ("drop", "concatenate", "raise")
"""What ``feedback="model"`` does with a pair whose every attempt was rejected."""
log = logging.getLogger(__name__)
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
            raise InputError(
                f"score must be an int 1..5, got {self.score!r}; fix the record of "
                f"instruction {self.instruction[:50]!r}",
                field="score",
            )
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
    feedback_source: str = "given"
    """Where ``feedback`` came from: ``given`` (a column, ``pair_feedback=``), ``model`` (written by a judge
    comparing the responses) or ``concatenate`` (the two absolute feedbacks joined: the fallback)."""

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
    return (
        f"Response A: {feedback_a.strip()} Response B: {feedback_b.strip()} "
        f"Response {winner} is better on this criteria."
    )


_CHOOSE = (
    "choose how the pairwise feedback is written: feedback='model' with judge=PrometheusJudge(...) (or a "
    "backend): a judge writes one feedback comparing both responses, checked against the known winner "
    "(Prometheus 2, section 3.3; resumable with store=); or feedback='concatenate': the two absolute "
    "feedbacks joined (a weaker fallback, labelled feedback_source='concatenate')"
)


def plan_pairs(records: Sequence[FeedbackRecord], scores: Sequence[float] | None = None) -> list[tuple[int, int, str]]:
    """``(index at A, index at B, winner)`` for every pair with different scores within each group.

    Groups are taken in first-seen order, pairs in index order; the winner is placed at "A" for the
    1st, 3rd, ... pair overall and at "B" for the others, so the verdict counts differ by at most one.

    >>> plan_pairs([FeedbackRecord("q", r, None, "[c]", "f", s) for r, s in (("x", 1), ("y", 3), ("z", 5))])
    [(1, 0, 'A'), (0, 2, 'B'), (2, 1, 'A')]
    """
    if scores is not None and len(scores) != len(records):
        raise InputError(
            f"scores has {len(scores)} entries for {len(records)} records; pass one per record", field="scores"
        )
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.group or r.instruction, []).append(i)
    out: list[tuple[int, int, str]] = []
    for idxs in groups.values():
        for i, j in itertools.combinations(idxs, 2):
            si, sj = (scores[i], scores[j]) if scores is not None else (records[i].score, records[j].score)
            if si != sj:
                win, lose = (i, j) if si > sj else (j, i)
                out.append((win, lose, "A") if len(out) % 2 == 0 else (lose, win, "B"))
    return out


def build_preference_collection(
    records: Sequence[FeedbackRecord],
    *,
    feedback: str | None = None,
    judge: Judges | None = None,
    scores: Sequence[float] | None = None,
    pair_feedback: Mapping[tuple[int, int], str] | None = None,
    store: str | Path | JudgmentStore | None = None,
    on_failure: str = "drop",
) -> list[PairRecord]:
    """All pairs with different scores within each group (instruction); the higher score wins (``plan_pairs``).

    ``feedback`` (required unless ``pair_feedback`` covers every pair): ``"model"`` has ``judge`` (a
    ``PrometheusJudge``, a backend, or a ``ComparativeWriter``) write comparative feedback, with
    ``store`` (a judgment store path) making the run resumable, and ``on_failure`` deciding the pairs
    whose every output contradicted the label (``drop``, ``concatenate``: labelled fallback, ``raise``);
    ``"concatenate"`` joins the absolute feedbacks (``compose_pair_feedback``). ``scores`` replaces the
    records' scores for the comparison (e.g. a mean of several graders); ``pair_feedback`` maps
    ``(winner index, loser index)`` to a ready feedback.
    """
    plan = plan_pairs(records, scores)
    given = pair_feedback or {}
    win_lose = [(a, b) if w == "A" else (b, a) for a, b, w in plan]
    todo = [k for k, wl in enumerate(win_lose) if not given.get(wl)]
    if todo and feedback not in FEEDBACK_MODES:
        raise ConfigError(f"feedback={feedback!r}: {len(todo)} pairs need a pairwise feedback; {_CHOOSE}")
    if on_failure not in ON_FAILURE:
        raise ConfigError(f"on_failure: expected one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
    written: dict[int, str] = {}
    if todo and feedback == "model":
        written = _model_feedback(records, plan, todo, judge, scores, store)
        failed = [k for k in todo if k not in written]
        if failed and on_failure == "raise":
            raise ConfigError(
                f"the judge wrote no feedback matching the known winner for {len(failed)} of "
                f"{len(todo)} pairs; raise max_attempts, use a stronger judge, or pass "
                f"on_failure='drop' or 'concatenate'"
            )
        if failed:
            log.warning(
                "comparative feedback failed for %d of %d pairs: %s",
                len(failed),
                len(todo),
                "dropped" if on_failure == "drop" else "concatenated (feedback_source='concatenate')",
            )
    out: list[PairRecord] = []
    for k, (a_i, b_i, w) in enumerate(plan):
        a, b = records[a_i], records[b_i]
        if given.get(win_lose[k]):
            fb, src = given[win_lose[k]], "given"
        elif k in written:
            fb, src = written[k], "model"
        elif feedback == "model" and on_failure == "drop":
            continue
        else:
            fb, src = compose_pair_feedback(a.feedback, b.feedback, w), "concatenate"
        out.append(PairRecord(a.instruction, a.response, b.response, a.reference_answer, a.rubric, fb, w, a.group, src))  # type: ignore[arg-type]
    return out


def _model_feedback(
    records: Sequence[FeedbackRecord],
    plan: list[tuple[int, int, str]],
    todo: list[int],
    judge: Judges | None,
    scores: Sequence[float] | None,
    store: str | Path | JudgmentStore | None,
) -> dict[int, str]:
    from .comparative import ComparativeWriter, Comparison

    if judge is None:
        raise ConfigError(
            f"feedback='model' needs judge=: a PrometheusJudge (any backend), a backend or a "
            f"ComparativeWriter; {_CHOOSE}"
        )
    writer = judge if isinstance(judge, ComparativeWriter) else ComparativeWriter(judge, store=store)
    sc = scores if scores is not None else [r.score for r in records]
    comps = []
    for k in todo:
        a_i, b_i, w = plan[k]
        a, b = records[a_i], records[b_i]
        comps.append(
            Comparison(
                a.instruction,
                a.response,
                b.response,
                a.reference_answer,
                a.rubric,
                a.feedback,
                b.feedback,
                sc[a_i],
                sc[b_i],
                w,
            )
        )
    try:
        texts = writer.write(comps)
    finally:
        if writer is not judge:
            writer.close()
    return {k: t for k, t in zip(todo, texts, strict=True) if t is not None}


def records_summary(records: Iterable[FeedbackRecord | PairRecord]) -> dict[str, int]:
    """Counts of verdicts (``"1"``..``"5"``, ``"A"``, ``"B"``) over records.

    >>> records_summary([PairRecord("q", "a", "b", None, "[c]", "f", "A")])
    {'A': 1}
    """
    return dict(sorted(Counter(verdict_of(r) for r in records).items()))


def verdict_of(record: FeedbackRecord | PairRecord) -> str:
    """``"1"``..``"5"`` for a feedback record, ``"A"``/``"B"`` for a pair."""
    return str(record.score) if isinstance(record, FeedbackRecord) else record.winner


__all__ = [
    "FEEDBACK_HUB_IDS",
    "PREFERENCE_HUB_IDS",
    "FEEDBACK_MODES",
    "FeedbackRecord",
    "PairRecord",
    "compose_pair_feedback",
    "plan_pairs",
    "build_preference_collection",
    "records_summary",
]
