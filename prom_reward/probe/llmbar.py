"""LLMBar pairwise accuracy: does the judge still pick the output that follows the instruction when the other
looks better? Per set, over both orders, and the Natural-minus-Adversarial ``gaps``."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from prom_reward.core.protocol import Retry
from prom_reward.core.results import all_answered
from prom_reward.probe.data import LLMBarPair
from prom_reward.stats import bootstrap_ci

POOLED = "Adversarial"
"""The name of the four adversarial sets taken together."""


def set_stats(pairs: list[LLMBarPair], verdicts: list[Any], *, seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    """Accuracy statistics of one set from its pairs and their two-order ``Verdict``s."""
    right = []  # per pair: (order 1 right, order 2 right)
    failed = agreed = 0
    for pair, v in zip(pairs, verdicts, strict=True):
        want = "A" if pair.label == 1 else "B"
        winners = tuple(v.order_winners) + (None,) * (2 - len(v.order_winners))
        right.append((winners[0] == want, winners[1] == want))
        failed += sum(w is None for w in winners[:2])
        agreed += winners[0] is not None and winners[0] == winners[1]
    n = len(pairs)
    if not n:
        keys = ("n", "accuracy", "accuracy_ci", "order_accuracy", "both_right", "agreement", "failed")
        return {**dict.fromkeys(keys), "n": 0, "order_accuracy": [None, None], "failed": 0}
    per_pair = [(a + b) / 2 for a, b in right]
    return {
        "n": n,
        "accuracy": fmean(per_pair),
        "accuracy_ci": list(bootstrap_ci(per_pair, seed=seed, resamples=resamples)),
        "order_accuracy": [fmean(float(a) for a, _ in right), fmean(float(b) for _, b in right)],
        "both_right": fmean(float(a and b) for a, b in right),
        "agreement": agreed / n,
        "failed": failed,
    }


def llmbar_accuracy(
    judge: Any,
    pairs: dict[str, list[LLMBarPair]],
    *,
    rubric: Any = "helpfulness",
    seed: int = 0,
    resamples: int = 2000,
    outage: Retry | None = None,
) -> dict[str, Any]:
    """``{"sets": {name: set_stats}, "gaps": {name: Natural's accuracy - its}}`` (the pooled adversarial sets as
    ``POOLED``), every pair judged in both orders in one batched call."""
    flat = [p for ps in pairs.values() for p in ps]
    verdicts = (
        judge.compare(
            [p.instruction for p in flat],
            [p.output_1 for p in flat],
            [p.output_2 for p in flat],
            rubric,
            swap=True,
            outage=outage,
        )
        if flat
        else []
    )
    all_answered(verdicts)  # a judge that did not answer measures nothing
    answers = iter(verdicts)  # in the order of flat
    groups = {name: [(p, next(answers)) for p in ps] for name, ps in pairs.items()}
    adversarial = [pv for name, pvs in groups.items() if name.startswith("Adversarial_") for pv in pvs]
    if adversarial:
        groups[POOLED] = adversarial
    sets = {
        name: set_stats([p for p, _ in pvs], [v for _, v in pvs], seed=seed + i, resamples=resamples)
        for i, (name, pvs) in enumerate(groups.items())
    }
    natural = sets.get("Natural", {}).get("accuracy")
    gaps = {
        name: (natural - s["accuracy"]) if natural is not None and s["accuracy"] is not None else None
        for name, s in sets.items()
        if name != "Natural"
    }
    return {"sets": sets, "gaps": gaps}
