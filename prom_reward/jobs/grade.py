"""Absolute-grade rows: what ``prom-reward grade`` (and ``grade --ray``) writes per input row.

Example:
    >>> from types import SimpleNamespace
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Right. [RESULT] 5"])
    >>> args = SimpleNamespace(rubric="helpfulness", instruction_col="instruction", response_col="response",
    ...                        reference_col="reference_answer", rubric_col="rubric")
    >>> grade_rows(judge, [{"instruction": "2+2?", "response": "4"}], args)[0]["score"]
    5.0
"""

from __future__ import annotations

from typing import Any

from prom_reward.jobs.compare import check_rows


def grade_rows(judge: Any, rows: list[dict[str, Any]], args: argparse.Namespace,
                start: int = 0) -> list[dict[str, Any]]:
    """Grade a batch of rows (``start``: the first row's position in the input, for error messages)."""
    rubric = check_rows(rows, args, start, keys=("instruction_col", "response_col"))
    refs = [r.get(args.reference_col) for r in rows]
    grades = judge.grade([r[args.instruction_col] for r in rows], [r[args.response_col] for r in rows], rubric,
                         refs if any(x is not None for x in refs) else None)
    out = []
    for r, g in zip(rows, grades):
        out.append({**r, "score": g.score, "feedback": g.feedback, "expected_score": g.expected_score,
                    "probabilities": {str(k): v for k, v in g.probabilities.items()} if g.probabilities else None,
                    "judge_failures": g.failures, "judge_retries": g.retries, "forced_verdicts": g.forced})
    return out
