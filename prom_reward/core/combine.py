"""Turning sampled runs into ``Grade`` and ``Verdict`` results: the mean score and verdict distribution of the
valid samples, the majority winner of each order, the one rule for combining swapped orders, and Direct2Pair
(``TieRounds``: verdicts from the grades of both responses, tied pairs re-graded at temperature 1.0)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from prom_reward.confidence.indicators import confidence_from_samples, merge_confidences
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.results import Grade, JudgeFailure, JudgeSample, Verdict, Winner, failed_verdict, with_failed
from prom_reward.core.sampler import ItemRun, expected_value, no_expected
from prom_reward.errors import InputError

COSTS = ("retries", "failures", "forced", "prompt_tokens", "completion_tokens")


def _costs(parts: Sequence[ItemRun] | Sequence[Grade]) -> dict[str, Any]:
    """What a judgment spent: ``COSTS`` summed over the runs (or grades) it is made of."""
    if len(parts) == 1:  # (one run: no sums to build)
        return {name: getattr(parts[0], name) for name in COSTS}
    return {name: sum(getattr(p, name) for p in parts) for name in COSTS}


def grade_from_run(run: ItemRun, *, truncated: bool = False) -> Grade:
    """Combine one item's samples into a Grade (score None when no sample parsed), with its failure: the run's
    (input, transport), else ``output`` when no sample gave a score."""
    valid = run.valid
    scores = tuple(int(s.verdict) for s in valid)  # type: ignore[arg-type]
    dists = [s.probabilities for s in valid if s.probabilities]  # their mean over every key any of them has
    dist = {k: fmean(d.get(k, 0.0) for d in dists) for k in sorted({k for d in dists for k in d})} if dists else None
    probs = {int(k): v for k, v in dist.items()} if dist else None
    missing = no_expected(sum(s.scored_tokens for s in valid)) if valid and not dist else None
    error = run.error
    if error is None and not scores:
        error = JudgeFailure("output", f"after its retries the judge gave {no_verdict(run.failures, run.samples)}")
    return Grade(
        score=sum(scores) / len(scores) if scores else None,
        scores=scores,
        feedback=valid[0].feedback if valid else None,
        samples=tuple(run.samples),
        probabilities=probs,
        expected_score=expected_value(dist),
        expected_reason=missing,
        truncated=truncated,
        confidence=confidence_from_samples(valid),
        error=error,
        **_costs([run]),
    )


def order_summary(run: ItemRun) -> tuple[Winner | None, float | None]:
    """(majority winner, None where the samples split evenly; P(A)) in this order, for one order's samples."""
    valid = run.valid
    if not valid:
        return None, None
    n_a = sum(1 for s in valid if s.verdict == "A")
    dists = [s.probabilities for s in valid if s.probabilities]
    p_a = fmean(d.get("A", 0.0) for d in dists) if len(dists) == len(valid) else n_a / len(valid)
    return (None if 2 * n_a == len(valid) else "A" if 2 * n_a > len(valid) else "B"), p_a


ORDERS = ("A-B", "B-A")  # the two orders in a reason: as given, and swapped


def no_verdict(failures: int, samples: Sequence[JudgeSample] = ()) -> str:
    """The reason of a judgment whose ``failures`` samples lack a verdict, with the format's reason for the last."""
    last = next((s.reason for s in reversed(samples) if s.verdict is None and s.reason), None)
    return f"no verdict in {failures} sample(s)" + (f" (last: {last})" if last else "")


def _undecided(runs: Sequence[ItemRun], winners: Sequence[Winner | None]) -> tuple[bool, str | None]:
    """(tie, reason) of one order or both: None reason when they give a winner."""
    failed = [name for name, r in zip(ORDERS, runs, strict=False) if not r.valid]
    if len(failed) == len(runs):
        return False, no_verdict(sum(r.failures for r in runs), [s for r in runs for s in r.samples])
    if failed:
        bad = runs[ORDERS.index(failed[0])]
        return False, f"order {failed[0]} failed: {no_verdict(bad.failures, bad.samples)}"
    if None not in winners and len(set(winners)) == 1:
        return False, None
    if None not in winners:
        return True, "tie: the two orders disagree"
    return True, "tie: the samples split evenly"


def verdict_from_runs(first: ItemRun, swapped: ItemRun | None = None, *, truncated: bool = False) -> Verdict:
    """Combine one order (or both orders with swap) into a Verdict in the original labels, with its failure: an
    order that failed (input, transport) decides nothing; no verdict is the judge's ``output`` failure."""
    runs = [first] if swapped is None else [first, swapped]
    (winner, p_a), *swapped_orders = [order_summary(r) for r in runs]
    winners: list[Winner | None] = [winner] + [
        None if w is None else "B" if w == "A" else "A" for w, _ in swapped_orders
    ]
    ps = [p_a] + [None if p is None else 1.0 - p for _, p in swapped_orders]
    tie, reason = _undecided(runs, winners)
    failed = [(name, r.error) for name, r in zip(ORDERS, runs, strict=False) if r.error is not None]
    error = JudgeFailure("output", reason) if reason is not None and not tie else None
    if failed:
        name, error = failed[0]
        reason = f"order {name} failed: {error.reason}" if len(runs) == 2 and len(failed) == 1 else error.reason
        tie, ps = False, [None]
    known = [p for p in ps if p is not None]
    valid = [s for r in runs for s in r.valid]
    swap = float(winners[0] == winners[1]) if swapped is not None and None not in winners else None
    return Verdict(
        winner=winners[0] if reason is None else None,
        feedback=valid[0].feedback if valid else None,  # the original order's first, if any
        samples=tuple(s for r in runs for s in r.samples),
        p_a=fmean(known) if known and len(known) == len(runs) else None,
        tie=tie,
        order_winners=tuple(winners),
        reason=reason,
        confidence=merge_confidences([confidence_from_samples(r.valid) for r in runs], swap_agreement=swap),
        truncated=truncated,
        error=error,
        **_costs(runs),
    )


def verdict_from_grades(a: Grade, b: Grade, *, tie: bool, tie_rounds: int) -> Verdict:
    """The Direct2Pair verdict of two grades: the higher score wins; equal or missing scores give no winner (with the
    first grade's failure, if one failed)."""
    winner: Winner | None = None
    reason: str | None = None
    if a.score is not None and b.score is not None and a.score != b.score:
        winner = "A" if a.score > b.score else "B"
    elif a.score is None or b.score is None:
        label, g = ("A", a) if a.score is None else ("B", b)
        reason = f"response {label} not graded: {no_verdict(g.failures, g.samples)}"
    else:
        reason = f"tie: equal grades after {tie_rounds} tie round(s)"
    return Verdict(
        winner=winner,
        reason=reason,
        feedback=a.feedback,
        samples=a.samples + b.samples,
        tie=tie,
        order_winners=(winner,),
        grades=(a, b),
        tie_rounds=tie_rounds,
        confidence=merge_confidences([a.confidence, b.confidence]),
        truncated=a.truncated or b.truncated,
        error=next((g.error for g in (a, b) if g.error is not None), None),
        **_costs([a, b]),
    )


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
