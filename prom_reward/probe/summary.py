"""The probe record as tables (``llmbar_table``, ``shifts_table``: rows for any renderer) and the one-screen
markdown summary ``prom-reward probe`` prints (and the HTML report embeds)."""

from __future__ import annotations

from typing import Any

from prom_reward.probe.run import POOLED

Table = tuple[list[str], list[list[str]]]
"""(header, rows) of formatted cells."""


def fmt_number(x: float | None, signed: bool = False, digits: int = 2) -> str:
    """A table cell: ``n/a`` for None, an int as it is, else ``digits`` decimals (never ``-0.00``)."""
    if x is None:
        return "n/a"
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    x = 0.0 if abs(x) < 0.5 * 10**-digits else x
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(ci: list[float] | None, signed: bool = False) -> str:
    return "n/a" if not ci else f"[{fmt_number(ci[0], signed)}, {fmt_number(ci[1], signed)}]"


def llmbar_table(llmbar: dict[str, Any]) -> Table:
    """One row per LLMBar set (the pooled adversarial sets last): accuracy with its interval, per order, the gap."""
    header = "set|pairs|accuracy|95% CI|order 1|order 2|both right|orders agree|no verdict|gap vs Natural".split("|")
    rows = []
    for name, s in llmbar["sets"].items():
        orders = s.get("order_accuracy") or [None, None]
        gap = "" if name == "Natural" else fmt_number(llmbar["gaps"].get(name), signed=True)
        shares = [fmt_number(x) for x in (*orders, s["both_right"], s["agreement"])]
        rows.append(
            [name, str(s["n"]), fmt_number(s["accuracy"]), _ci(s["accuracy_ci"]), *shares, str(s["failed"]), gap]
        )
    return header, rows


def shifts_table(shifts: dict[str, Any]) -> Table:
    """One row per edit: mean shift and share of rising scores with their intervals, falls, length ratio."""
    header = ["edit", "items", "mean shift", "95% CI", "rises", "95% CI", "falls", "length x"]
    rows = []
    for name, e in shifts["edits"].items():
        shift = [fmt_number(e["mean_shift"], signed=True), _ci(e["mean_shift_ci"], signed=True)]
        rises = [fmt_number(e["rise_share"]), _ci(e["rise_share_ci"])]
        rows.append(
            [name, str(e["n"]), *shift, *rises, fmt_number(e["fall_share"]), fmt_number(e["mean_length_ratio"])]
        )
    return header, rows


def markdown_table(table: Table) -> str:
    """A markdown pipe table."""
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def verdict_warnings(record: dict[str, Any]) -> list[str]:
    """What undermines the figures, said before them: forced verdicts and judgments without a verdict."""
    out = []
    stats = record.get("judge_stats") or {}
    forced, samples = int(stats.get("forced") or 0), int(stats.get("samples") or 0)
    if forced:
        fmt = record.get("judge_format") or {}
        marker, name = fmt.get("verdict_marker"), fmt.get("name")
        after = f"the verdict marker of judge format {name}" if name else "the judge format's verdict marker"
        after = f"{marker} (judge format {name})" if marker else after
        out.append(
            f"**{forced} of {samples} judge samples had a forced verdict**: each output was cut at max_tokens "
            f"before its verdict, which was read from the next-token distribution after {after}; raise "
            "--max-tokens for verdicts the judge writes out."
        )
    missing = []
    if record.get("llmbar"):
        sets = record["llmbar"]["sets"]
        failed = sum(int(s["failed"]) for name, s in sets.items() if name != POOLED)
        if failed:
            missing.append(f"{failed} LLMBar order-judgments")
    if record.get("shifts"):
        sh = record["shifts"]
        if sh.get("original_failed"):
            missing.append(f"{sh['original_failed']} of {sh['n_items']} unedited items")
        lost = sum(int(e["failed"]) for e in sh["edits"].values())
        if lost:
            total = sum(int(e["failed"]) + int(e["n"]) for e in sh["edits"].values())
            missing.append(f"{lost} of {total} edit comparisons (the edited or the unedited grade)")
    if missing:
        out.append("**Without a verdict:** " + ", ".join(missing) + ".")
    return out


def not_run_notes(record: dict[str, Any]) -> list[str]:
    """One line per part the record did not run, with why (its ``not_run``)."""
    return [f"**Not run:** {part}: {why.rstrip('.')}." for part, why in (record.get("not_run") or {}).items()]


def heading(record: dict[str, Any]) -> str:
    """The summary's first line: the judge, the date and the seconds the probe took."""
    return (
        f"Hacking probe of {record.get('judge')} ({str(record.get('date', ''))[:10]}, "
        f"{record.get('seconds', 0.0):.0f} s)"
    )


def tables(record: dict[str, Any]) -> list[tuple[str, Table]]:
    """Each part's table with the line that says how to read it."""
    out = []
    if record.get("llmbar"):
        note = "LLMBar pairwise accuracy, both orders (0.50 = chance; gap = Natural minus the set):"
        out.append((note, llmbar_table(record["llmbar"])))
    if record.get("shifts"):
        s = record["shifts"]
        note = (
            f"Score shifts under edits ({s['score']}; {s['n_items']} items, each edit against the mean "
            f"of {s.get('baseline_samples', 1)} grade(s) of the unedited response, mean "
            f"{fmt_number(s['original_mean'])}, {s['original_failed']} without a verdict; 'none' = one more "
            "grade of the unedited response, the judge's own noise):"
        )
        out.append((note, shifts_table(s)))
    return out


def summary(record: dict[str, Any]) -> str:
    """The one-screen markdown summary of a probe record: its warnings and parts not run, then the tables."""
    out = [heading(record)]
    warnings = verdict_warnings(record) + not_run_notes(record)
    if warnings:
        out += ["", *warnings]
    for note, table in tables(record):
        out += ["", note, "", markdown_table(table)]
    return "\n".join(out)
