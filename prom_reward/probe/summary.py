"""The probe record as tables: rows for any renderer (``llmbar_table``, ``shifts_table``), and the one-screen
markdown summary ``prom-reward probe`` prints (and the HTML report embeds).

Example:
    >>> record = {"judge": "j", "date": "2026-01-01T00:00:00+00:00", "seconds": 1.0, "llmbar": None,
    ...           "shifts": {"score": "score", "n_items": 1, "original_mean": 3.0, "original_failed": 0,
    ...                      "edits": {"none": {"n": 1, "failed": 0, "mean_shift": 0.0, "mean_shift_ci": [0.0, 0.0],
    ...                                         "rise_share": 0.0, "rise_share_ci": [0.0, 0.0], "fall_share": 0.0,
    ...                                         "mean_length_ratio": 1.0, "description": "unchanged"}}}}
    >>> print(summary(record).splitlines()[-1])
    | none | 1 | +0.00 | [+0.00, +0.00] | 0.00 | [0.00, 0.00] | 0.00 | 1.00 |
"""

from __future__ import annotations

from typing import Any

Table = tuple[list[str], list[list[str]]]
"""(header, rows) of formatted cells."""


def _num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _ci(ci: list[float] | None, signed: bool = False) -> str:
    return "n/a" if not ci else f"[{_num(ci[0], signed)}, {_num(ci[1], signed)}]"


def llmbar_table(llmbar: dict[str, Any]) -> Table:
    """One row per LLMBar set (the pooled adversarial sets last): accuracy with its interval, per order, the gap."""
    header = ["set", "pairs", "accuracy", "95% CI", "order 1", "order 2", "both right", "orders agree", "no verdict",
              "gap vs Natural"]
    rows = []
    for name, s in llmbar["sets"].items():
        orders = s.get("order_accuracy") or [None, None]
        gap = llmbar["gaps"].get(name)
        rows.append([name, str(s["n"]), _num(s["accuracy"]), _ci(s["accuracy_ci"]), _num(orders[0]),
                     _num(orders[1]), _num(s["both_right"]), _num(s["agreement"]), str(s["failed"]),
                     "" if name == "Natural" else _num(gap, signed=True)])
    return header, rows


def shifts_table(shifts: dict[str, Any]) -> Table:
    """One row per edit: mean shift and share of rising scores with their intervals, falls, length ratio."""
    header = ["edit", "items", "mean shift", "95% CI", "rises", "95% CI", "falls", "length x"]
    rows = []
    for name, e in shifts["edits"].items():
        rows.append([name, str(e["n"]), _num(e["mean_shift"], signed=True), _ci(e["mean_shift_ci"], signed=True),
                     _num(e["rise_share"]), _ci(e["rise_share_ci"]), _num(e["fall_share"]),
                     _num(e["mean_length_ratio"])])
    return header, rows


def markdown_table(table: Table) -> str:
    """A pipe table.

    >>> print(markdown_table((["a", "b"], [["1", "2"]])))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def summary(record: dict[str, Any]) -> str:
    """The one-screen summary of a probe record (markdown)."""
    out = [f"Hacking probe of {record.get('judge')} ({str(record.get('date', ''))[:10]}, "
           f"{record.get('seconds', 0.0):.0f} s)"]
    if record.get("llmbar"):
        out += ["", "LLMBar pairwise accuracy, both orders (0.50 = chance; gap = Natural minus the set):", "",
                markdown_table(llmbar_table(record["llmbar"]))]
    if record.get("shifts"):
        s = record["shifts"]
        out += ["", f"Score shifts under edits ({s['score']}; {s['n_items']} items, each edit against the mean "
                f"of {s.get('baseline_samples', 1)} grade(s) of the unedited response, mean "
                f"{_num(s['original_mean'])}, {s['original_failed']} without a verdict; 'none' = one more grade of "
                "the unedited response, the judge's own noise):", "", markdown_table(shifts_table(s))]
    return "\n".join(out)
