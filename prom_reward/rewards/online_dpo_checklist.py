"""Checklist pairs of online DPO: a pair whose row has a checklist is decided by its completions' checklist scores.

``OnlineDPOJudgeReward`` judges a pair by a pairwise verdict; a row with a checklist (the reward config's
``checklist_column``, a list of criteria as in ``prom_reward.checklist.criteria``) is judged instead through
``prom_reward.checklist.judging``, the path the other rewards, ``grade`` and ``pairs`` use: both completions of
every such pair in one judge call (explicit mode: one judgment per distinct (completion, criterion)), each
scored by its aggregate (``checklist_aggregation``). The pair's verdict is the higher aggregate's side; equal
aggregates are a tie, and a completion without an aggregate (an essential criterion not judged) leaves the pair
without a winner, with the reason. The reward then settles such pairs as it settles any undecided pair (its mean
``p_a``, none here, then the seeded coin), counted. A transport failure is retried by the reward's outage policy
like a pairwise call's.

Example:
    >>> from prom_reward import PrometheusJudge
    >>> from prom_reward.checklist.config import ChecklistConfig
    >>> from prom_reward.checklist.criteria import parse_checklist
    >>> judge = PrometheusJudge(backend="scripted", outputs=["No. [RESULT] 1", "Yes. [RESULT] 5"])
    >>> verdicts, _ = checklist_verdicts(
    ...     judge, (["2+2?"], ["5"], ["4"]), [parse_checklist(["Says 4"])], [None], ChecklistConfig()
    ... )
    >>> verdicts[0].winner
    'B'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prom_reward.backends.bridge import run_sync
from prom_reward.checklist.config import ChecklistConfig
from prom_reward.checklist.criteria import Criterion, parse_checklist
from prom_reward.checklist.judging import ChecklistOutcome, ajudge_checklists
from prom_reward.core.results import JudgeFailure, Verdict
from prom_reward.errors import InputError
from prom_reward.rewards.outage import judge_until_answered


def _failure(o: ChecklistOutcome, side: str) -> JudgeFailure:
    reason = o.error.reason if o.error is not None else o.aggregate.reason or "the checklist could not be judged"
    return JudgeFailure(o.error.kind if o.error is not None else "output", f"response {side}: {reason}")


def checklist_verdicts(
    judge: Any,
    texts: tuple[list[str], list[str], list[str]],
    checklists: Sequence[tuple[Criterion, ...]],
    refs: Sequence[Any],
    cfg: ChecklistConfig,
    *,
    truncate_response: bool | None = None,
    deadline: float | None = None,
) -> tuple[list[Verdict], dict[str, float]]:
    """A ``Verdict`` per pair (instructions, responses A, responses B) from each side's checklist aggregate, and
    the batch's checklist metrics (pass rates, ``prom_reward.checklist.metrics``)."""
    ins, a, b = texts
    k = len(checklists)
    both_refs = list(refs) * 2
    batch = run_sync(
        lambda: ajudge_checklists(
            judge,
            ins + ins,
            a + b,
            list(checklists) * 2,
            cfg,
            both_refs if any(r is not None for r in both_refs) else None,
            truncate_response=truncate_response,
            deadline=deadline,
        )
    )
    verdicts = []
    for oa, ob in zip(batch.outcomes[:k], batch.outcomes[k:], strict=True):
        va, vb = oa.aggregate.value, ob.aggregate.value
        feedback = f"A: {oa.feedback or ''}\nB: {ob.feedback or ''}"
        if va is None or vb is None:
            error = _failure(oa, "A") if va is None else _failure(ob, "B")
            verdicts.append(Verdict(winner=None, feedback=feedback, error=error, reason=error.reason))
        elif va == vb:
            why = f"tie: both responses' checklist scores are {va:.3g}"
            verdicts.append(Verdict(winner=None, tie=True, feedback=feedback, reason=why))
        else:
            verdicts.append(Verdict(winner="A" if va > vb else "B", feedback=feedback))
    return verdicts, batch.metrics


def judge_with_checklists(
    reward: Any,
    texts: tuple[list[str], list[str], list[str]],
    rubrics: list[Any],
    refs: list[Any],
    checklists: list[Any],
) -> tuple[list[list[Verdict]], int, dict[int, str], dict[str, float]]:
    """The pairs of an ``OnlineDPOJudgeReward`` batch judged: those without a checklist by its pairwise path
    (``reward._judge_isolated``: verdicts, tie rounds), those with one by ``checklist_verdicts`` through the
    reward's outage policy. Returns each pair's verdicts ([] when it could not be judged), the tie rounds run,
    the reason of each pair not judged (a bad checklist among them: the row, criterion and fix), and the
    checklist metrics of the first call."""
    n = len(rubrics)
    history: list[list[Verdict]] = [[] for _ in range(n)]
    unjudged: dict[int, str] = {}
    parsed: dict[int, tuple[Criterion, ...]] = {}
    for i, value in enumerate(checklists):
        try:
            if value is not None:
                parsed[i] = parse_checklist(value, row=i)
        except InputError as e:
            unjudged[i] = f"{reward.config.checklist_column}: {e}"

    def pick(xs: Sequence[Any], idx: Sequence[int]) -> list[Any]:
        return [xs[i] for i in idx]

    plain = [i for i in range(n) if checklists[i] is None]
    rounds = 0
    if plain:
        verdicts, rounds, failed = reward._judge_isolated(
            tuple(pick(t, plain) for t in texts), pick(rubrics, plain), pick(refs, plain)
        )
        for pos, i in enumerate(plain):
            history[i] = verdicts[pos]
        unjudged.update({plain[pos]: why for pos, why in failed.items()})
    if not parsed:
        return history, rounds, unjudged, {}
    cfg, truncate = reward.config.checklist(), reward.config.over_context == "truncate"

    def call(idx: list[int], until: float | None) -> tuple[list[Verdict], dict[str, float]]:
        cls = [parsed[i] for i in idx]
        picked = (pick(texts[0], idx), pick(texts[1], idx), pick(texts[2], idx))
        return checklist_verdicts(
            reward.judge, picked, cls, pick(refs, idx), cfg, truncate_response=truncate, deadline=until
        )

    iso = judge_until_answered(
        [[i] for i in parsed], call, lambda out: [v.error for v in out[0]], reward.config.outage, health=reward.health
    )
    unjudged.update(iso.outage)
    metrics: dict[str, float] = {}
    for idx, (verdicts_, batch_metrics) in iso.parts:  # a later part (a retry) replaces an earlier one's outcome
        metrics = metrics or batch_metrics
        settle_part(idx, [[v] for v in verdicts_], iso.outage, history, unjudged)
    return history, rounds, unjudged, metrics


def settle_part(
    idx: list[int],
    verdicts: list[list[Verdict]],
    outage: dict[int, str],
    history: list[list[Verdict]],
    unjudged: dict[int, str],
) -> None:
    """One ``judge_until_answered`` part's outcome for pairs ``idx`` (each pair's verdicts, first round first),
    written over an earlier part's: a pair left to the outage or not judged at all (its first verdict failed on
    its input or the transport) gets no verdicts and its reason in ``unjudged``; else its verdicts. The one rule
    of both online DPO paths (pairwise verdicts and checklist pairs)."""
    for i, vs in zip(idx, verdicts, strict=True):
        first = vs[0]
        if i in outage:
            history[i] = []
        elif first.error is not None and first.error.kind != "output":
            history[i], unjudged[i] = [], first.error.reason
        else:
            history[i] = vs
            unjudged.pop(i, None)
