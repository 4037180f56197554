"""The HTML report: one self-contained page (inline CSS and SVG, no scripts, no external URLs) of a ``summarize``
result and a hacking-probe record (``render_report``); ``prom-reward report`` writes it.

Example:
    >>> from prom_reward.report.summarize import summarize
    >>> page = render_report(summarize([{"instruction": "q", "response": "r", "score": 4.0, "feedback": "ok"}]))
    >>> page.startswith("<!doctype html>") and page.count('<svg class="plot"') == 2 and "http" not in page
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from prom_reward.errors import InputError
from prom_reward.probe.summary import fmt_number, heading, not_run_notes, tables, verdict_warnings
from prom_reward.report.svg import bar_chart, scatter

_CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:28px auto;max-width:1140px;color:#1d1d1f;
background:#fafafa;padding:0 18px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:30px 0 10px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:13px;margin:0 0 18px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #e2e2e2;border-radius:8px;
padding:10px 16px;min-width:140px}.card b{display:block;font-size:22px}.card span{color:#666;font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:14px}.plots svg{border:1px solid #e2e2e2;border-radius:6px;background:#fff}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:6px 0}
th,td{border:1px solid #e2e2e2;padding:4px 9px;text-align:left;vertical-align:top}th{background:#f2f4f7}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.item{background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:10px 14px;margin:8px 0;font-size:13px}
.item .score{float:right;font-weight:700;font-size:16px;color:#2f6db5}.item pre{white-space:pre-wrap;margin:4px 0;
font-family:inherit;background:#f6f7f9;padding:6px 8px;border-radius:4px;max-height:160px;overflow:hidden}
.item .label{color:#666;font-size:11px;text-transform:uppercase;letter-spacing:.04em;margin-top:6px}
.item .where{color:#666;font-size:12px;margin-right:60px}
.note{color:#555;font-size:13px}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(c: Any) -> str:
        numeric = isinstance(c, (int, float)) or c == "n/a" or (isinstance(c, str) and c[:1] in set("+-0123456789"))
        return f'<td class="num">{escape(str(c))}</td>' if numeric else f"<td>{escape(str(c))}</td>"

    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(map(cell, r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text(label: str, text: str, limit: int = 700) -> str:
    """A row's text under its label, clipped at ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit] + f" … [{len(text) - limit} more characters]"
    return f'<div class="label">{label}</div><pre>{escape(text)}</pre>'


def _cards(s: dict[str, Any]) -> str:
    n = max(s["n"], 1)
    cards = [
        ("rows", str(s["n"])),
        ("without a verdict", f"{s['failed']} ({s['failed'] / n:.1%})"),
        ("forced verdicts", f"{s['forced']} ({s['forced'] / n:.1%})"),
    ]
    if s["kind"] == "grade":
        cards += [("mean score", fmt_number(s["mean"])), ("median score", fmt_number(s["median"]))]
        cards.append(("score vs length (Spearman)", fmt_number(s["length_spearman"])))
    else:
        v = s["verdicts"]
        cards += [(f"{w} wins", str(v[w])) for w in ("A", "B")]
        cards += [("ties (split samples)", str(v["tie"])), ("ties (swap disagreement)", str(v["swap_disagreement"]))]
        cards.append(("longer response won", fmt_number(s["longer_wins"])))
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{escape(val)}</b><span>{escape(label)}</span></div>' for label, val in cards)
        + "</div>"
    )


def _plots(s: dict[str, Any]) -> str:
    rho = fmt_number(s["length_spearman"])
    if s["kind"] == "grade":
        scale = s["scale"]  # the judge format's own scale (1..5, 1..3, 0..1)
        if s["integer_scores"]:
            labels = [str(k) for k in scale]
            counts = [sum(1 for v in s["values"] if round(v) == k) for k in scale]
        else:  # expected scores: 8 bins over the scale
            lo, hi = min(scale), max(scale)
            step = (hi - lo) / 8
            bins = [(lo + step * k, lo + step * (k + 1)) for k in range(8)]
            labels = [f"{a:.3g}-{b:.3g}" for a, b in bins]
            counts = [sum(1 for v in s["values"] if a <= v < b or (b == hi and v == hi)) for a, b in bins]
        dist = bar_chart(
            "score-distribution", labels, counts, title="Score distribution", x_label="score", y_label="rows"
        )
        vs = scatter(
            "score-vs-length",
            s["lengths"],
            s["values"],
            title=f"Score vs response length (Spearman {rho})",
            x_label="response length (characters, log scale)",
            y_label="score",
            log_x=True,
            jitter=0.12 if s["integer_scores"] else 0.0,
        )
    else:
        v = s["verdicts"]
        dist = bar_chart(
            "verdict-distribution",
            ["A", "B", "tie", "swap_disagreement", "no verdict"],
            [v["A"], v["B"], v["tie"], v["swap_disagreement"], v["failed"]],
            title="Verdicts",
            x_label="verdict",
            y_label="pairs",
        )
        vs = scatter(
            "p-a-vs-length",
            s["length_ratios"],
            s["values"],
            title=f"P(A) vs length ratio (Spearman {rho})",
            x_label="log2(length A / length B)",
            y_label="P(A wins)",
        )
    return f'<div class="plots">{dist}{vs}</div>'


def _checklist(c: dict[str, Any]) -> str:
    """Pass rates per category and per criterion (a pitfall passes when avoided), and the most undecided."""

    def rows(table: dict[str, dict[str, Any]]) -> list[list[Any]]:
        return [[k, e["n"], fmt_number(e["pass_rate"]), e["undecided"]] for k, e in table.items()]

    parts = [
        f'<p class="note">{c["rows"]} rows with a checklist; a criterion passes when satisfied, a pitfall when '
        "avoided.</p>",
        *(_table([by, "verdicts", "pass rate", "undecided"], rows(c[f"by_{by}"])) for by in ("category", "criterion")),
    ]
    if c["most_undecided"]:
        parts.append(_table(["most often undecided", "times"], [list(x) for x in c["most_undecided"]]))
    return "\n".join(parts)


def _group_table(groups: dict[str, dict[str, Any]], kind: str, name: str) -> str:
    if kind == "grade":  # the columns after the group's name, and the stat each shows
        header, stats = "rows|mean score|without a verdict|score vs length (5+ rows)", "n mean failed length_spearman"
    else:
        header, stats = "pairs|A wins|ties|without a verdict|longer won", "n a_wins ties failed longer_wins"
    return _table(
        [name, *header.split("|")], [[k, *(fmt_number(g[s]) for s in stats.split())] for k, g in groups.items()]
    )


def _items(members: list[dict[str, Any]], kind: str) -> str:
    out = []
    for m in members:
        if kind == "grade":
            shown = _text("response", m["response"])
        else:
            shown = _text("response A", m["response_a"], 400) + _text("response B", m["response_b"], 400)
        out.append(
            f'<div class="item"><span class="score">{fmt_number(m["value"])}</span>'
            f'<div class="where">row {m["index"]} · rubric: {escape(m["rubric"])}'
            f"{(' · ' + escape(m['source'])) if m.get('source') else ''}"
            f"{' · <b>forced verdict</b>' if m.get('forced') else ''}</div>"
            + _text("instruction", m["instruction"], 400)
            + shown
            + _text("judge feedback", m["feedback"] or "(none)")
            + "</div>"
        )
    return "".join(out) or '<p class="note">No row has a verdict.</p>'


def probe_section(record: dict[str, Any]) -> str:
    """The report's section for a probe record; ``InputError`` (field ``probe``) when the record lacks what
    ``prom-reward probe`` writes (a record edited by hand, of another version, or another JSON file)."""
    try:
        charts = []
        for key, group, value, y_label, extra in (
            ("llmbar", "sets", "accuracy", "accuracy", {"y_range": (0.0, 1.0), "reference": 0.5}),
            ("shifts", "edits", "mean_shift", "shift", {"reference": 0.0}),
        ):
            if part := record.get(key):
                rows = part[group]
                title = (
                    "LLMBar accuracy, both orders"
                    if key == "llmbar"
                    else f"Mean shift of the {part['score'].replace('_', ' ')} per edit"
                )
                charts.append(
                    bar_chart(
                        f"probe-{key}",
                        [n.replace("Adversarial_", "Adv. ") if key == "llmbar" else n for n in rows],
                        [rows[n][value] for n in rows],
                        title=title,
                        y_label=y_label,
                        intervals=[rows[n][f"{value}_ci"] for n in rows],
                        **extra,
                    )
                )
        return "".join(
            [
                f'<h2>Hacking probe</h2><p class="meta">{escape(heading(record))}</p>',
                *(  # markdown **bold** as <b>
                    '<p class="note">' + re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escape(w)) + "</p>"
                    for w in verdict_warnings(record) + not_run_notes(record)
                ),
                f'<div class="plots">{"".join(charts)}</div>',
                *(f'<p class="note">{escape(note)}</p>{_table(*table)}' for note, table in tables(record)),
            ]
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise InputError(
            f"not a complete prom-reward probe record ({type(e).__name__}: {e}); fix: give the .json that "
            "prom-reward probe wrote, unchanged",
            field="probe",
        ) from None


def _forced_note(s: dict[str, Any]) -> str:
    """What a reader must know about forced verdicts: how many rows have one, and what forcing is."""
    if not s["forced"]:
        return ""
    marker = f"the verdict marker of judge format {escape(s['format'])}"
    if s["verdict_marker"]:
        marker = f"<code>{escape(s['verdict_marker'])}</code> ({marker})"
    return (
        f'<p class="note"><b>{s["forced"]} of {s["n"]} rows have a forced verdict</b>: the judge\'s output was cut '
        "before its verdict, which was then read from its next-token distribution after "
        f"{marker} "
        "(<code>--force-verdict</code>; flagged on each row below). Raise <code>--max-tokens</code> for verdicts the "
        "judge writes out.</p>"
    )


def render_report(
    summary: dict[str, Any],
    probe: dict[str, Any] | None = None,
    *,
    title: str = "Judge report",
    source: str = "",
    generated: str = "",
) -> str:
    """The report page for a ``summarize`` result (and a probe record, when given)."""
    kind = summary["kind"]
    noun = "Highest scored" if kind == "grade" else "Most confident for A"
    low = "Lowest scored" if kind == "grade" else "Most confident for B"
    fail_rows = [[reason, count] for reason, count in summary["failures"]]
    parts = [
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_CSS}</style></head><body>",
        f'<h1>{escape(title)}</h1><p class="meta">{escape(source)} · prom-reward {kind} rows · '
        f"{summary['n']} rows{(' · ' + escape(generated)) if generated else ''}</p>",
        _cards(summary),
        f"<h2>{'Scores' if kind == 'grade' else 'Verdicts'}</h2>",
        _plots(summary),
        "<h2>Failures</h2>",
        _table(["reason", "rows"], fail_rows) if fail_rows else '<p class="note">Every row has a verdict.</p>',
        _forced_note(summary),
        "<h2>By rubric</h2>",
        _group_table(summary["by_rubric"], kind, "rubric"),
    ]
    if summary["by_source"]:
        parts += [
            f"<h2>By source ({escape(summary['source_column'])})</h2>",
            _group_table(summary["by_source"], kind, summary["source_column"]),
        ]
    if summary.get("checklist"):
        parts += ["<h2>Checklist</h2>", _checklist(summary["checklist"])]
    parts += [f"<h2>{noun}</h2>", _items(summary["highest"], kind), f"<h2>{low}</h2>", _items(summary["lowest"], kind)]
    if probe:
        parts.append(probe_section(probe))
    parts.append("</body></html>\n")
    return "\n".join(parts)
