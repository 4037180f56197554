"""Verdict balancing of training records: down- or up-sample each score (or A/B) to one count, seeded.

Prometheus 1 balanced the score distribution of its Feedback Collection; raw collections are often
skewed (the pocket absolute split is 12/24/59/371/254 for scores 1-5). ``balance_by_verdict`` brings
every verdict present to the same count:

- ``"min"``: down-sample every verdict to the rarest one's count (no record repeats);
- ``"max"``: up-sample every verdict to the commonest one's count (all records kept, seeded repeats);
- an int ``N``: every verdict to exactly ``N`` (down where it has more, up where it has fewer).

Down-sampling draws without replacement; up-sampling keeps every record once and draws the rest with
replacement. The result is in a seeded shuffled order, deterministic for a seed.

Example:
    >>> from train_judge.data import FeedbackRecord, records_summary
    >>> recs = [FeedbackRecord("q", f"r{i}", None, "[c]", "f", s) for i, s in enumerate([1, 4, 4, 4, 5, 5])]
    >>> records_summary(balance_by_verdict(recs, "min")), records_summary(balance_by_verdict(recs, 2))
    ({'1': 1, '4': 1, '5': 1}, {'1': 2, '4': 2, '5': 2})
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from .config import check_target
from .data import FeedbackRecord, PairRecord, verdict_of

R = TypeVar("R", FeedbackRecord, PairRecord)


def balance_by_verdict(records: Sequence[R], target: str | int, *, seed: int = 0) -> list[R]:
    """``records`` resampled so every verdict present has the same count (see the module docstring)."""
    check_target(target)
    groups: dict[str, list[R]] = {}
    for r in records:
        groups.setdefault(verdict_of(r), []).append(r)
    if not groups:
        return []
    sizes = [len(g) for g in groups.values()]
    n = min(sizes) if target == "min" else max(sizes) if target == "max" else int(target)
    rng = random.Random(seed)
    out: list[R] = []
    for key in sorted(groups):
        g = groups[key]
        if len(g) >= n:
            out.extend(rng.sample(g, n))
        else:
            out.extend(g)
            out.extend(rng.choices(g, k=n - len(g)))
    rng.shuffle(out)
    return out
