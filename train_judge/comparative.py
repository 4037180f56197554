"""Comparative pairwise feedback written by a judge model (Prometheus 2, section 3.3).

When a Preference Collection is built from a Feedback Collection, each pair needs one feedback that
*compares* the two responses. Prometheus 2 had a strong model write it from the two absolute feedbacks
(its annotators preferred that to joining the two feedbacks 88 % of the time). ``ComparativeWriter``
does the same with any judge reachable through this project's backends (a ``PrometheusJudge`` on
``vllm``, ``openai``, ``transformers`` ..., or a backend object): the prompt gives the instruction, both
responses, the rubric, both absolute feedbacks with their scores and the known winner, and asks for one
feedback covering what both responses do and where they differ, ending with ``[RESULT] A|B``.

An output is kept only when its last ``[RESULT]`` names the known winner (and it has a body, and no
second ``[RESULT]``); the rejected pairs are asked again (``attempt`` 1, 2, ... so a judgment store keys
fresh samples), up to ``max_attempts`` in all. With ``store=`` every answer goes to a SQLite
``JudgmentStore``: a re-run replays every attempt from it and generates nothing.

Example:
    >>> from prom_reward.backends.scripted import ScriptedBackend
    >>> c = Comparison("q", "a", "b", None, "[Right?]", "Wrong.", "Right.", 1, 5, "B")
    >>> w = ComparativeWriter(ScriptedBackend(outputs=["Both answer; B is right. [RESULT] A",
    ...                                                "Both answer; only B is right. [RESULT] B"]))
    >>> w.write([c]), w.report.rejected, w.report.accepted
    (['Both answer; only B is right.'], 1, 1)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prom_reward.backends.base import Backend, GenerationRequest
from prom_reward.backends.bridge import run_sync
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.errors import ConfigError, JudgeUnavailableError
from prom_reward.format.sanitize import neutralize

from .config import fits

if TYPE_CHECKING:
    from prom_reward.backends.store import JudgmentStore
    from prom_reward.core.judge import PrometheusJudge

COMPARE_SYSTEM_PROMPT = (
    "You are a fair judge assistant assigned to deliver insightful feedback that compares "
    "individual performances, highlighting how each stands relative to others within the "
    "same cohort."
)
"""System prompt of the comparative-feedback request (the Prometheus 2 relative system prompt)."""

COMPARE_TEMPLATE = """###Task Description:
An instruction (might include an Input inside it), two responses to evaluate (denoted as Response A and Response B), \
{ref_intro}a score rubric, the feedback already written on each response on its own with its score, and the final \
verdict are given.
1. Write one feedback that compares Response A and Response B strictly based on the given score rubric: first state \
what both responses do (their commonalities), then where they differ, and why these differences make Response \
{winner} better.
2. Use the two feedbacks as evidence; do not copy them one after the other and do not quote their scores.
3. The verdict is fixed: Response {winner} is better. Do not argue for the other response.
4. After writing the feedback, write "[RESULT] {winner}".
5. The output format should look as follows: "(a feedback comparing Response A and Response B) [RESULT] {winner}"
6. Please do not generate any other opening, closing, and explanations.

###Instruction:
{instruction}

###Response A:
{response_a}

###Response B:
{response_b}
{reference}
###Score Rubric:
{rubric}

###Feedback on Response A (score {score_a}):
{feedback_a}

###Feedback on Response B (score {score_b}):
{feedback_b}

###Verdict: Response {winner} is better.

###Comparative Feedback: """
"""The comparative-feedback template (filled by ``render_comparison``)."""

_LAST_RESULT = re.compile(r"\[RESULT\]\s*\(?\s*([AB])\s*\)?\s*\.?\s*$")


@dataclass(frozen=True)
class Comparison:
    """One pair to write comparative feedback for (placement already decided)."""

    instruction: str
    response_a: str
    response_b: str
    reference_answer: str | None
    rubric: str
    feedback_a: str
    """The absolute feedback on response A."""
    feedback_b: str
    score_a: float
    score_b: float
    winner: str
    """``"A"`` or ``"B"``: the verdict the feedback must end with."""


@dataclass
class ComparativeReport:
    """Counters over a writer's lifetime."""

    comparisons: int = 0
    """Pairs asked for."""
    accepted: int = 0
    """Pairs with a kept feedback."""
    rejected: int = 0
    """Outputs thrown away (verdict missing or contradicting the label, empty body)."""
    failed: int = 0
    """Pairs with no kept feedback after ``max_attempts``."""
    requests: int = 0
    """Requests sent to the backend (store hits included)."""
    unanswered: int = 0
    """Requests the transport failed (judge unreachable, 5xx, timed out, request refused): no output to judge."""
    last_error: str | None = None
    """Why the last unanswered request got no answer."""


def render_comparison(c: Comparison) -> str:
    """The filled comparative template (responses and feedbacks with template markers neutralised).

    >>> "###Verdict: Response A is better." in render_comparison(
    ...     Comparison("q", "a", "b", "ref", "[c]", "fa", "fb", 4, 2, "A"))
    True
    """
    if c.winner not in ("A", "B"):
        raise ConfigError(f"Comparison.winner: expected 'A' or 'B', got {c.winner!r}")
    ref = c.reference_answer
    return COMPARE_TEMPLATE.format(
        ref_intro="a reference answer, " if ref is not None else "",
        instruction=c.instruction,
        response_a=neutralize(c.response_a)[0],
        response_b=neutralize(c.response_b)[0],
        reference=f"\n###Reference Answer:\n{ref}\n" if ref is not None else "",
        rubric=c.rubric,
        score_a=_num(c.score_a),
        score_b=_num(c.score_b),
        feedback_a=neutralize(c.feedback_a.strip())[0],
        feedback_b=neutralize(c.feedback_b.strip())[0],
        winner=c.winner,
    )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def accept_output(text: str, winner: str) -> str | None:
    """The feedback body of ``text`` when it ends with ``[RESULT] winner`` (else None).

    >>> accept_output("Both are short; A is exact. [RESULT] A", "A"), accept_output("x [RESULT] B", "A")
    ('Both are short; A is exact.', None)
    """
    m = _LAST_RESULT.search(text.strip())
    if not m or m.group(1) != winner:
        return None
    body = text.strip()[: m.start()].strip()
    if body.lower().startswith("feedback:"):
        body = body[len("feedback:") :].strip()
    return body if body and "[RESULT]" not in body else None


class ComparativeWriter:
    """Writes comparative feedback with ``judge`` (a ``PrometheusJudge`` or a backend object).

    Args:
        judge: a ``PrometheusJudge`` (its backend, its store if it has one, and its sampling are used)
            or a backend with ``generate(requests)``.
        store: a judgment store (SQLite path or ``JudgmentStore``) to save and replay answers.
        sampling: sampling options (default: the judge's, else the Prometheus 2 defaults), logprobs off.
        max_attempts: requests per pair at most (1 = no regeneration).
        batch_size: requests per backend call (each call's answers are saved before the next).
    """

    def __init__(
        self,
        judge: PrometheusJudge | Backend,
        *,
        store: str | Path | JudgmentStore | None = None,
        sampling: SamplingOverrides = None,
        max_attempts: int = 3,
        batch_size: int = 256,
    ) -> None:
        from prom_reward.backends.cached import CachedBackend
        from prom_reward.core.judge import PrometheusJudge

        backend = judge.backend if isinstance(judge, PrometheusJudge) else judge
        if not isinstance(backend, Backend):
            raise ConfigError(
                f"judge: expected a PrometheusJudge or a backend with generate(requests), got "
                f"{type(judge).__name__}; e.g. PrometheusJudge('model', backend='openai', base_url=...)"
            )
        for key, value in (("max_attempts", max_attempts), ("batch_size", batch_size)):
            if not fits(value, int) or value < 1:
                raise ConfigError(f"{key}: expected an int >= 1, got {value!r}")
        if store is not None and isinstance(backend, CachedBackend):
            raise ConfigError(
                "store: the judge already has a judgment store; pass store= once (to the judge or to the writer)"
            )
        self._cached = CachedBackend(backend, store) if store is not None else None
        self.backend = self._cached or backend
        self._store = self.backend if isinstance(self.backend, CachedBackend) else None  # the judge's or this one
        base = judge.sampling if isinstance(judge, PrometheusJudge) else SamplingConfig()
        self.sampling = dataclasses.replace(base.merged(sampling), logprobs=None)
        self.max_attempts, self.batch_size = max_attempts, batch_size
        self.report = ComparativeReport()

    def write(self, comparisons: Sequence[Comparison]) -> list[str | None]:
        """One feedback per comparison (None where every attempt was rejected), without ``[RESULT]``."""
        users = [render_comparison(c) for c in comparisons]  # validates everything before generating
        out: list[str | None] = [None] * len(comparisons)
        pending = list(range(len(comparisons)))
        errors: dict[int, str] = {}  # pair -> why its latest request got no answer
        self.report.comparisons += len(comparisons)
        for attempt in range(self.max_attempts):
            if not pending:
                break
            still: list[int] = []
            for start in range(0, len(pending), self.batch_size):
                chunk = pending[start : start + self.batch_size]
                reqs = [
                    GenerationRequest(COMPARE_SYSTEM_PROMPT, users[i], self.sampling, attempt=attempt) for i in chunk
                ]
                results = run_sync(lambda: self.backend.agenerate(reqs))  # noqa: B023 (awaited at once)
                self.report.requests += len(reqs)
                for i, res in zip(chunk, results, strict=True):
                    errors.pop(i, None)
                    if res.error is not None:  # no answer: not a rejected output, and asked again
                        self.report.unanswered += 1
                        self.report.last_error = errors[i] = res.error
                        still.append(i)
                        continue
                    text = res.completions[0].text if res.completions else ""
                    body = accept_output(text, comparisons[i].winner)
                    if body is None:
                        self.report.rejected += 1
                        still.append(i)
                    else:
                        out[i] = body
            pending = still
        if errors:  # a judge that could not be reached says nothing about the pairs: never dropped as failures
            raise JudgeUnavailableError(
                f"the judge gave no answer for {len(errors)} of {len(comparisons)} comparisons after "
                f"{self.max_attempts} attempts (last: {self.report.last_error}); fix: run again when the judge is "
                "reachable (with store=, the answers already given are not asked again)",
                cause=self.report.last_error,
            )
        self.report.failed += len(pending)
        self.report.accepted += len(comparisons) - len(pending)
        return out

    @property
    def store_hits(self) -> int:
        """Requests answered from the store (0 without one)."""
        return self._store.hits if self._store is not None else 0

    @property
    def store_misses(self) -> int:
        """Requests the store did not hold (sent to the model)."""
        return self._store.misses if self._store is not None else 0

    def close(self) -> None:
        """Close the store this writer opened (the judge and its backend stay open)."""
        if self._cached is not None:
            self._cached.store.close()
