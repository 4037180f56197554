"""What checklist rewards cost: engine requests and judge tokens per reward, explicit vs implicit vs one Likert
grade, on the same judge and rows, and the second epoch's store hit rate.

Rows are BiGGen Bench instances (``benchmarks/data/biggen_rubrics.json``): the instruction, its reference answer
(cut to ``--response-chars``) as the response, and a checklist of four criteria: the instance's own rubric as an
essential criterion (its five score descriptions), two hand-written binary criteria (important, optional) and a
pitfall. The Likert reward grades the same response once against the instance's rubric. Every variant goes
through ``PrometheusReward.judge_batch`` (one batch), on one judge whose judgment store starts empty, in this
order (after one warm-up judgment that starts an in-process engine): Likert, explicit, implicit, then the explicit
variant again (the second epoch). ``judgments`` are the distinct judgments a variant needs; ``lookups`` the
requests it asks the store-backed backend (a forced verdict is a second request), ``requests`` those the engine
generated (the explicit variant's essential criterion is the row's own rubric, so the store answers it from the
Likert run), ``hit_rate`` the share the store answered.

``python -m benchmarks.checklist_cost --judge SPEC [--limit 8] [--max-tokens 64] [--out rec.json]``

Example:
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> import tempfile, os
    >>> store = os.path.join(tempfile.mkdtemp(), "s.sqlite")
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Ok. [RESULT] 4"] * 21, store=store)
    >>> rec = checklist_cost(judge, biggen_rows(2))
    >>> [rec[v]["lookups_per_reward"] for v in ("likert", "explicit", "implicit")], rec["epoch2"]["hit_rate"]
    ([1.0, 4.0, 1.0], 1.0)
    >>> rec["explicit"]["requests_per_reward"]  # the essential criterion is the row's rubric: Likert's judgment
    3.0
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prom_reward.format.rubrics import Rubric
from prom_reward.rewards.reward import PrometheusReward
from prom_reward.rewards.samples import RewardSample

DATA = Path(__file__).parent / "data" / "biggen_rubrics.json"
EXTRA = [
    {"criterion": "Addresses every requirement stated in the instruction", "category": "important"},
    {"criterion": "Is organised in clear steps or sections", "category": "optional", "weight": 0.5},
    {"criterion": "States something false or made up", "category": "pitfall"},
]


def biggen_rows(limit: int, response_chars: int = 400) -> list[dict[str, Any]]:
    """The first ``limit`` BiGGen instances as rows of instruction, response, rubric and checklist."""
    rows = []
    for inst in list(json.loads(DATA.read_text()).values())[:limit]:
        rubric = Rubric.from_biggen(inst["score_rubric"])
        own = {"criterion": rubric.criteria, "category": "essential", "weight": 2.0, "rubric": rubric.to_dict()}
        rows.append(
            {
                "instruction": inst["input"],
                "response": inst["reference_answer"][:response_chars],
                "rubric": rubric,
                "checklist": [own, *EXTRA],
            }
        )
    return rows


def _run(judge: Any, rows: list[dict[str, Any]], checklist: bool, **options: Any) -> dict[str, Any]:
    reward = PrometheusReward(judge, normalize="unit", **options)
    samples = [
        RewardSample(
            r["instruction"], r["response"], rubric=r["rubric"], checklist=r["checklist"] if checklist else None
        )
        for r in rows
    ]
    backend = judge.backend
    hits, misses = getattr(backend, "hits", 0), getattr(backend, "misses", 0)
    start = time.perf_counter()
    out = reward.judge_batch(samples)
    seconds = time.perf_counter() - start
    asked, stored = backend.misses - misses, backend.hits - hits
    n = len(rows)
    tokens = out.metrics.get("judge_prompt_tokens", 0.0) + out.metrics.get("judge_completion_tokens", 0.0)
    return {
        "rewards": n,
        "rewarded": sum(r is not None for r in out.rewards),
        "requests": asked,
        "stored": stored,
        "judgments_per_reward": out.metrics.get("checklist_judgments", out.metrics.get("unique_items", 0.0)) / n,
        "lookups_per_reward": (asked + stored) / n,
        "requests_per_reward": asked / n,
        "tokens_per_reward": tokens / n,
        "prompt_tokens": out.metrics.get("judge_prompt_tokens", 0.0),
        "completion_tokens": out.metrics.get("judge_completion_tokens", 0.0),
        "rows_per_s": n / seconds if seconds else float("inf"),
        "seconds": seconds,
        "hit_rate": stored / (asked + stored) if asked + stored else float("nan"),
        "mean_reward": sum(r for r in out.rewards if r is not None) / max(1, sum(r is not None for r in out.rewards)),
    }


def checklist_cost(judge: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each variant's cost on ``judge`` (its backend a ``CachedBackend``: a judge built with ``store=``)."""
    judge.grade(["Warm-up: say ok."], ["ok"], "helpfulness")  # an in-process engine starts here, not in a timing
    rec = {
        "likert": _run(judge, rows, False),
        "explicit": _run(judge, rows, True),
        "implicit": _run(judge, rows, True, checklist_mode="implicit"),
        "epoch2": _run(judge, rows, True),
    }
    likert = rec["likert"]
    for name in ("explicit", "implicit"):
        v = rec[name]
        v["requests_vs_likert"] = v["requests"] / likert["requests"] if likert["requests"] else float("nan")
        v["tokens_vs_likert"] = (
            v["tokens_per_reward"] / likert["tokens_per_reward"] if likert["tokens_per_reward"] else float("nan")
        )
        v["rows_per_s_vs_likert"] = v["rows_per_s"] / likert["rows_per_s"]
    return rec


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    from .judge_spec import build_judge, judge_label

    ap = argparse.ArgumentParser(prog="python -m benchmarks.checklist_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True)
    ap.add_argument("--server")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--response-chars", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    store = Path(tempfile.mkdtemp()) / "judgments.sqlite"
    overrides = {"sampling": {"max_tokens": args.max_tokens}, "store": str(store)}
    judge = build_judge(args.judge, server=args.server, overrides=overrides)
    try:
        rec = {"benchmark": "checklist_cost", "judge": judge_label(args.judge), "rows": args.limit}
        rec.update(checklist_cost(judge, biggen_rows(args.limit, args.response_chars)))
    finally:
        judge.close()
    text = json.dumps(rec, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
