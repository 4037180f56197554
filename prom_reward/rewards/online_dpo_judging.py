"""How online DPO's pairs are judged: by pairwise verdicts with tie rounds, or by checklist scores.

``ajudge_isolated`` judges every pair of an ``OnlineDPOJudgeReward`` batch through the reward's outage policy
(``rewards.outage``: pairs the transport failed are asked again) and returns each pair's verdicts, first round
first. A pair is judged by a pairwise verdict with both orders (``ajudge_pairs``); one the judge cannot separate
(orders disagree, samples split, no verdict) is re-judged with fresh samples, up to ``max_tie_rounds`` times.
A pair that fails on its input or the transport past the budget is not judged, with its reason.

Checklist pairs: a pair whose row has a checklist is decided by its completions' checklist scores.
A row with a checklist (the reward config's
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
    >>> from prom_reward.backends.bridge import run_sync
    >>> from prom_reward.checklist.config import ChecklistConfig
    >>> from prom_reward.checklist.criteria import parse_checklist
    >>> judge = PrometheusJudge(backend="scripted", outputs=["No. [RESULT] 1", "Yes. [RESULT] 5"])
    >>> verdicts, _ = run_sync(lambda: achecklist_verdicts(
    ...     judge, (["2+2?"], ["5"], ["4"]), [parse_checklist(["Says 4"])], [None], ChecklistConfig()
    ... ))
    >>> verdicts[0].winner
    'B'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prom_reward.checklist.config import ChecklistConfig
from prom_reward.checklist.criteria import Criterion, parse_checklist
from prom_reward.checklist.judging import ChecklistOutcome, ajudge_checklists
from prom_reward.core.protocol import Judge
from prom_reward.core.results import JudgeFailure, Verdict
from prom_reward.errors import InputError
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.outage import JudgeHealth, ajudge_until_answered

Texts = tuple[list[str], list[str], list[str]]
"""A batch's pairs as (instructions, responses A, responses B)."""
Judged = tuple[list[list[Verdict]], int, dict[int, str], dict[str, float]]
"""What ``ajudge_isolated`` returns: each pair's verdicts, the tie rounds run, the unjudged pairs' reasons and the
checklist metrics."""


def _failure(o: ChecklistOutcome, side: str) -> JudgeFailure:
    reason = o.error.reason if o.error is not None else o.aggregate.reason or "the checklist could not be judged"
    return JudgeFailure(o.error.kind if o.error is not None else "output", f"response {side}: {reason}")


async def achecklist_verdicts(
    judge: Any,
    texts: Texts,
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
    batch = await ajudge_checklists(
        judge,
        ins + ins,
        a + b,
        list(checklists) * 2,
        cfg,
        both_refs if any(r is not None for r in both_refs) else None,
        truncate_response=truncate_response,
        deadline=deadline,
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


async def ajudge_isolated(
    judge: Judge,
    texts: Texts,
    rubrics: list[Any],
    refs: list[Any],
    checklists: list[Any],
    cfg: RewardConfig,
    max_tie_rounds: int,
    health: JudgeHealth,
    failed: dict[int, str] | None = None,
) -> Judged:
    """Every pair judged through ``cfg.outage`` (failures recorded in ``health``): a pair without a checklist
    by ``ajudge_pairs``, one with a checklist by ``achecklist_verdicts``; the pairs of ``failed`` (pair -> reason:
    a prompt or completion that is not text) are not asked. Returns each pair's verdicts ([] where it could not be
    judged), the tie rounds run, the reason of each pair not judged (a bad checklist among them: the row, criterion
    and fix) and the checklist metrics of the first call that had any."""
    n = len(rubrics)
    unjudged: dict[int, str] = dict(failed or {})
    parsed: dict[int, tuple[Criterion, ...]] = {}
    for i, value in enumerate(checklists):
        try:
            if value is not None and i not in unjudged:
                parsed[i] = parse_checklist(value, row=i)
        except InputError as e:
            unjudged[i] = f"{cfg.checklist_column}: {e}"

    async def call(idx: list[int], until: float | None) -> tuple[list[list[Verdict]], int, dict[str, float]]:
        plain, listed = [i for i in idx if i not in parsed], [i for i in idx if i in parsed]
        out: dict[int, list[Verdict]] = {}
        metrics: dict[str, float] = {}
        rounds = 0
        if plain:
            picked = (_pick(texts[0], plain), _pick(texts[1], plain), _pick(texts[2], plain))
            verdicts, rounds = await ajudge_pairs(
                judge, picked, _pick(rubrics, plain), _pick(refs, plain), cfg, max_tie_rounds, until
            )
            out.update(zip(plain, verdicts, strict=True))
        if listed:
            picked = (_pick(texts[0], listed), _pick(texts[1], listed), _pick(texts[2], listed))
            found, metrics = await achecklist_verdicts(
                judge,
                picked,
                [parsed[i] for i in listed],
                _pick(refs, listed),
                cfg.checklist(),
                truncate_response=cfg.over_context == "truncate",
                deadline=until,
            )
            out.update((i, [v]) for i, v in zip(listed, found, strict=True))
        return [out[i] for i in idx], rounds, metrics

    todo = [[i] for i in range(n) if i not in unjudged]
    iso = await ajudge_until_answered(
        todo, call, lambda out: [vs[-1].error for vs in out[0]], cfg.outage, health=health
    )
    history: list[list[Verdict]] = [[] for _ in range(n)]
    unjudged.update(iso.outage)
    metrics: dict[str, float] = {}
    rounds = 0
    for idx, (verdicts, r, batch_metrics) in iso.parts:  # a retry's part replaces an earlier part's outcome
        rounds, metrics = max(rounds, r), metrics or batch_metrics
        for i, vs in zip(idx, verdicts, strict=True):
            if i in iso.outage:
                history[i] = []
            elif vs[0].error is not None and vs[0].error.kind != "output":  # failed on its input or transport
                history[i], unjudged[i] = [], vs[0].error.reason
            else:
                history[i] = vs
                unjudged.pop(i, None)
    return history, rounds, unjudged, metrics


async def ajudge_pairs(
    judge: Judge,
    texts: Texts,
    rubrics: list[Any],
    refs: list[Any],
    cfg: RewardConfig,
    max_tie_rounds: int,
    deadline: float | None,
) -> tuple[list[list[Verdict]], int]:
    """Every pair's verdicts, first round then up to ``max_tie_rounds`` tie rounds (fresh samples: temperature 1
    under a greedy judge) for the pairs still without a winner; and the number of tie rounds run."""
    history: list[list[Verdict]] = [[] for _ in rubrics]
    resample = {"temperature": 1.0} if judge.sampling.temperature == 0 else None
    todo, rounds = list(range(len(rubrics))), -1
    while todo and rounds < max_tie_rounds:
        verdicts = await judge.acompare(
            *(_pick(xs, todo) for xs in (*texts, rubrics, refs)),
            swap=True,
            sampling=resample if rounds >= 0 else None,
            truncate_response=cfg.over_context == "truncate",
            deadline=deadline,
        )
        for i, v in zip(todo, verdicts, strict=True):
            history[i].append(v)
        rounds += 1
        todo = [i for i in todo if history[i][-1].winner is None and _judged(history[i][-1])]
    return history, max(rounds, 0)


def _judged(verdict: Verdict) -> bool:
    """The judge read the pair (it may still have given no verdict): not failed on its input or the transport."""
    return verdict.error is None or verdict.error.kind == "output"


def _pick(xs: Sequence[Any], idx: Sequence[int]) -> list[Any]:
    return [xs[i] for i in idx]
