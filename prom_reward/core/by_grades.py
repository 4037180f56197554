"""Direct2Pair: a pairwise verdict from the absolute grades of both responses (``compare_by_grades``); tied
pairs are re-graded at temperature 1.0 up to ``max_tie_rounds``."""

from __future__ import annotations

from prom_reward.core.combine import verdict_from_grades
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.results import Grade, Verdict, failed_verdict, with_failed
from prom_reward.errors import InputError

TIE_SAMPLING = {"temperature": 1.0}  # the sampling overrides of a tie round


class TieRounds:
    """The grades of a batch of pairs (``every``; those in ``failed`` are not graded): first every pair, then the
    tied ones again, one round at a time, until ``verdicts`` decides each pair from its last grades."""

    def __init__(self, every: list[PairItem], failed: dict[int, InputError]) -> None:
        self.every, self.failed = every, failed
        self.pairs = [it for i, it in enumerate(every) if i not in failed]  # the positions below are in this list
        self.grades: list[tuple[Grade, Grade] | None] = [None] * len(self.pairs)
        self.rounds = [0] * len(self.pairs)

    def grade_items(self, idx: list[int]) -> list[GradeItem]:
        """The grade items of the pairs at ``idx``: every response A, then every response B."""
        pairs = [self.pairs[i] for i in idx]
        a = [GradeItem(p.instruction, p.response_a, p.rubric, p.reference_answer) for p in pairs]
        return a + [GradeItem(p.instruction, p.response_b, p.rubric, p.reference_answer) for p in pairs]

    def record(self, idx: list[int], graded: list[Grade]) -> None:
        """The grades of the pairs at ``idx`` (``graded`` in ``grade_items`` order); a regrade is a tie round."""
        for j, i in enumerate(idx):
            if self.grades[i] is not None:
                self.rounds[i] += 1
            self.grades[i] = (graded[j], graded[len(idx) + j])

    def _tie(self, i: int) -> bool:
        pair = self.grades[i]
        return pair is not None and pair[0].ok and pair[1].ok and pair[0].score == pair[1].score

    def tied(self) -> list[int]:
        """The positions of the pairs whose two grades are the same score."""
        return [i for i in range(len(self.pairs)) if self._tie(i)]

    def verdicts(self) -> list[Verdict]:
        """One verdict per pair of ``every``, in order (``combine.verdict_from_grades``)."""
        judged = []
        for i, pair in enumerate(self.grades):
            assert pair is not None, "every pair is graded before its verdict"
            judged.append(verdict_from_grades(*pair, tie=self._tie(i), tie_rounds=self.rounds[i]))
        return with_failed(len(self.every), self.failed, judged, failed_verdict)
