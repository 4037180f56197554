"""Pairwise verdict rows: what ``prom-reward compare`` (and ``compare --ray``) writes per input row.

A row holds an instruction, two responses (``response_a``, ``response_b``), an optional
``reference_answer`` and a ``rubric`` (or one ``--rubric`` for every row). ``compare_rows``
checks every row's columns before judging, calls ``PrometheusJudge.compare`` once for the batch
(both orders with ``swap``, the default, as in the Prometheus 2 evaluation) and returns the input
rows plus ``winner`` ("A"/"B"/None), ``p_a``, ``tie``, ``swap_agreement``, ``feedback``,
``judge_failures``, ``judge_retries``, ``forced_verdicts`` and ``judge_error``: None, or why
``winner`` is null. A tie (the two orders disagree, or one order's samples split evenly) is a
decided outcome: ``tie`` true and a ``judge_error`` starting with "tie:". A failure is a row
where no order gave a verdict (``is_failure``), never a made-up winner.

Example:
    >>> from types import SimpleNamespace
    >>> from prom_reward.core.judge import PrometheusJudge
    >>> judge = PrometheusJudge(backend="scripted", outputs=["A is right. [RESULT] A", "Now B. [RESULT] B"])
    >>> args = SimpleNamespace(rubric="helpfulness", swap=True, **COMPARE_COLUMNS)
    >>> row = compare_rows(judge, [{"instruction": "2+2?", "response_a": "4", "response_b": "5"}], args)[0]
    >>> row["winner"], row["swap_agreement"], row["judge_error"]
    ('A', True, None)
"""

from __future__ import annotations

from typing import Any

from prom_reward.errors import InputError

COMPARE_COLUMNS = dict(instruction_col="instruction", response_a_col="response_a", response_b_col="response_b",
                       reference_col="reference_answer", rubric_col="rubric")
"""The column options (``args`` attributes / ``compare_dataset`` keywords) and their defaults."""


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _rubric(rows: list[dict[str, Any]], args: Any, start: int) -> Any:
    if args.rubric is not None:
        return args.rubric
    for i, r in enumerate(rows):
        if r.get(args.rubric_col) is None:
            raise InputError(f"row {start + i}: no --rubric given and column {args.rubric_col!r} missing "
                             f"(columns: {sorted(r)}); pass --rubric NAME|FILE or name the column with --rubric-col",
                             index=start + i, field="rubric")
    return [r[args.rubric_col] for r in rows]


def check_rows(rows: list[dict[str, Any]], args: Any, start: int = 0,
               keys: tuple[str, ...] = ("instruction_col", "response_a_col", "response_b_col")) -> Any:
    """Raise ``InputError`` (row, column, flag) for a missing column (``keys``: the ``args`` attributes
    naming the required columns; ``prom-reward grade`` passes its own); return the rubric(s) to judge with."""
    for key in keys:
        col = getattr(args, key)
        for i, r in enumerate(rows):
            if col not in r:
                raise InputError(f"row {start + i}: column {col!r} missing (columns: {sorted(r)}); "
                                 f"name the right one with {_flag(key)}", index=start + i, field=col)
    return _rubric(rows, args, start)


def verdict_error(v: Any) -> str | None:
    """None when ``v`` has a winner, else why not."""
    if v.winner is not None:
        return None
    if v.tie:
        return "tie: the two orders disagree" if v.swap_agreement is False else "tie: the samples split evenly"
    return f"no verdict in {v.failures} sample(s) (no parseable [RESULT])"


def compare_rows(judge: Any, rows: list[dict[str, Any]], args: Any, start: int = 0) -> list[dict[str, Any]]:
    """Judge a batch of rows (``args``: ``rubric``, ``swap`` and the ``COMPARE_COLUMNS`` names);
    ``start`` is the first row's position in the input (for error messages)."""
    rubric = check_rows(rows, args, start)
    refs = [r.get(args.reference_col) for r in rows]
    verdicts = judge.compare([r[args.instruction_col] for r in rows], [r[args.response_a_col] for r in rows],
                             [r[args.response_b_col] for r in rows], rubric,
                             refs if any(x is not None for x in refs) else None, swap=args.swap)
    return [{**r, "winner": v.winner, "p_a": v.p_a, "tie": v.tie, "swap_agreement": v.swap_agreement,
             "feedback": v.feedback, "judge_failures": v.failures, "judge_retries": v.retries,
             "forced_verdicts": v.forced, "judge_error": verdict_error(v)} for r, v in zip(rows, verdicts)]


def failed_rows(rows: list[dict[str, Any]], judge: Any, swap: bool, error: str) -> list[dict[str, Any]]:
    """The rows of a batch whose judge call failed as a whole: null winner and ``error``."""
    return [{**r, "winner": None, "p_a": None, "tie": False, "swap_agreement": None, "feedback": None,
             "judge_failures": judge.num_samples * (2 if swap else 1), "judge_retries": 0, "forced_verdicts": 0,
             "judge_error": error} for r in rows]


def is_failure(row: dict[str, Any]) -> bool:
    """A row without a winner that is not a tie (no verdict, or the backend failed)."""
    return row["winner"] is None and not row["tie"]
