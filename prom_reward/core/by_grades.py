"""Direct2Pair: a pairwise verdict from the absolute grades of both responses (``compare_by_grades``).

Both responses of each pair are graded in one batch; the higher grade wins. Tied pairs (both graded,
same score) are re-graded at temperature 1.0, their requests numbered ``1000 * round`` so a judgment store
keeps the rounds apart, until one wins or ``max_tie_rounds`` is reached. A pair whose grade failed fails
with that grade's failure (``outcomes.graded_verdict``).

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Good. [RESULT] 4", "Poor. [RESULT] 2"])
    >>> (v,) = judge.compare_by_grades(["Name a prime."], ["7"], ["9"], "helpfulness")
    >>> v.winner, [g.score for g in v.grades]
    ('A', [4.0, 2.0])
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prom_reward.backends.sampling import SamplingOverrides
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.outcomes import graded_verdict, input_failure, with_failed
from prom_reward.core.results import Grade, Verdict
from prom_reward.errors import InputError

GradeCall = Callable[[list[GradeItem], SamplingOverrides, int], Awaitable[list[Grade]]]
"""Grades of items with these sampling overrides, their requests numbered with this attempt."""

TIE_SAMPLING = {"temperature": 1.0}
"""The sampling overrides of a tie round."""


def failed_pair(error: InputError) -> Verdict:
    """The verdict of a pair in ``failed``: unjudged, with its input's fault."""
    return Verdict(winner=None, error=input_failure(error))


def grade_items_of(pairs: list[PairItem]) -> list[GradeItem]:
    """The grade items of ``pairs``: every response A, then every response B."""
    a = [GradeItem(p.instruction, p.response_a, p.rubric, p.reference_answer) for p in pairs]
    return a + [GradeItem(p.instruction, p.response_b, p.rubric, p.reference_answer) for p in pairs]


async def verdicts_by_grades(
    grade: GradeCall, every: list[PairItem], failed: dict[int, InputError], max_tie_rounds: int
) -> list[Verdict]:
    """One Direct2Pair verdict per pair of ``every``, in order (``grade`` judges the grade items); a pair in
    ``failed`` fails with its input's fault, unjudged."""
    pairs = [it for i, it in enumerate(every) if i not in failed]
    n = len(pairs)
    if not n:
        return with_failed(len(every), failed, [], failed_pair)
    both = await grade(grade_items_of(pairs), None, 0)
    grades = [(both[i], both[n + i]) for i in range(n)]
    rounds = [0] * n

    def tied(i: int) -> bool:
        a, b = grades[i]
        return a.ok and b.ok and a.score == b.score

    for tie_round in range(1, max_tie_rounds + 1):
        todo = [i for i in range(n) if tied(i)]
        if not todo:
            break
        again = await grade(grade_items_of([pairs[i] for i in todo]), TIE_SAMPLING, 1000 * tie_round)
        for j, i in enumerate(todo):
            grades[i] = (again[j], again[len(todo) + j])
            rounds[i] += 1
    judged = [graded_verdict(a, b, tie=tied(i), tie_rounds=rounds[i]) for i, (a, b) in enumerate(grades)]
    return with_failed(len(every), failed, judged, failed_pair)
