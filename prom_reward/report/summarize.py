"""What the report shows, computed from a ``prom-reward grade`` or ``compare`` output: distributions, length
correlations, failure reasons, per-rubric, per-source and checklist tables, the extreme rows; forced verdicts flagged.

Example:
    >>> rows = [{"instruction": "q", "response": "short", "score": 2.0, "feedback": "Thin."},
    ...         {"instruction": "q", "response": "a longer answer", "score": 5.0, "feedback": "Full."},
    ...         {"instruction": "q", "response": "?", "score": None, "feedback": None, "judge_failures": 3}]
    >>> s = summarize(rows)
    >>> s["kind"], s["n"], s["failed"], s["forced"], s["length_spearman"], s["failures"]
    ('grade', 3, 1, 0, 1.0, [('no verdict after 3 failed samples', 1)])
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, median
from typing import Any

from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.core.results import tie_reason
from prom_reward.errors import ConfigError, InputError, PromRewardError
from prom_reward.format.columns import column_flag, column_text, find_column
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, get_judge_format
from prom_reward.stats import spearman

SOURCE_COLUMNS = ("source", "data_source", "response_source", "category", "model")
"""Columns looked for (in this order) to group rows by source when none is named."""


@dataclass(frozen=True)
class ReportColumns:
    """Which columns of the graded file hold what, read as the jobs read them (``prom_reward.format.columns``:
    None reads prom-reward's name or TRL's, a name given must be in every row; flag ``--<field>-col``)."""

    instruction: str | None = None
    response: str | None = None
    response_a: str | None = None
    response_b: str | None = None
    rubric: str = "rubric"
    source: str | None = None
    """The column to group by source; None: the first of ``SOURCE_COLUMNS`` the rows have."""

    def names(self, row: dict[str, Any], index: int) -> dict[str, str | None]:
        """The column of ``row`` read for each field (None: the row has none); ``InputError`` for a column a flag
        names that the row lacks, or a row holding a role under both names."""
        where = f"row {index}"
        return {
            f: find_column(row, f"{f}_column", v, where, required=False, flag=column_flag(f"{f}_column"), index=index)
            for f, v in vars(self).items()
            if v is not None or f != "source"
        }


def _shown(row: dict[str, Any], names: dict[str, str | None], field: str, index: int) -> str:
    """The text of a role's column as the judge read it (a message list as the rewards render it), "" without one."""
    name = names[field]
    if name is None:
        return ""
    try:
        value = column_text(row, name, f"{field}_column", f"row {index}", index=index)
    except InputError:  # not a message list the judge could read: shown as it is
        value = row[name]
    return _text(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value, default=str)


def recorded_format(record: Mapping[str, Any] | None, asked: str | None) -> JudgeFormat:
    """The judge format of a file: the one the judge its job ``record`` holds specifies (``JudgeSpec.of``), else
    ``asked`` (``--format``), else the default; ``InputError`` when the record and ``asked`` name two formats,
    or when the recorded one cannot be looked up by name and ``asked`` does not name it."""
    want = get_judge_format(asked) if asked else None
    if record is None:
        return want or get_judge_format(DEFAULT_FORMAT)
    judge = record.get("judge")
    # the backend (an object is recorded by its kind) says where the judge ran, not how it judged
    judge = {k: v for k, v in judge.items() if k != "backend"} if isinstance(judge, Mapping) else {}
    try:
        spec = JudgeSpec.of(judge)
    except ConfigError as e:
        raise InputError(
            f"its job record's judge is not one prom-reward wrote ({e}); fix: report the file with the record its "
            "job wrote",
            field="format",
        ) from None
    try:
        fmt: JudgeFormat | None = spec.judge_format
    except PromRewardError:  # a format defined outside the registry (a YAML file's name@digest)
        fmt = None
    recorded = fmt.name if fmt is not None else str(spec.format)
    if want is not None and want.name.lower() != recorded.lower():
        raise InputError(
            f"its job record says it was judged in format {recorded!r}, --format names {want.name!r}; fix: drop "
            "--format (the record decides) or report the file the format names",
            field="format",
        )
    if fmt is not None:
        return fmt
    if want is None:
        raise InputError(
            f"its job record names judge format {recorded!r}, which cannot be looked up by name; fix: name it "
            "with --format",
            field="format",
        )
    return want  # a format defined outside the registry, named by --format


def rubric_label(value: Any) -> str:
    """A short name for a rubric cell: a built-in name as it is, a rubric's criteria (first line, 80 chars).

    >>> rubric_label("helpfulness"), rubric_label({"criteria": "Is it kind?"}), rubric_label(None)
    ('helpfulness', 'Is it kind?', '(none)')
    >>> rubric_label("[Is the answer correct?]\\nScore 1: ...")
    'Is the answer correct?'
    """
    if value is None or value == "":
        return "(none)"
    if isinstance(value, str) and value.startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if isinstance(value, dict):
        value = value.get("criteria", json.dumps(value, sort_keys=True))
    text = str(value).strip().splitlines()[0] if str(value).strip() else "(none)"
    text = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    return text if len(text) <= 80 else text[:79] + "…"


def _number(row: dict[str, Any], key: str, index: int) -> float | None:
    value = row.get(key)
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else math.nan
    except OverflowError:  # an int too large for a float
        number = math.inf
    if math.isfinite(number):
        return number
    raise InputError(
        f"row {index}: {key!r} must be a number or null (finite, within a float's range), got {value!r:.60}; fix: "
        "give the file prom-reward wrote",
        index=index,
        field=key,
    )


MIN_GROUP_CORRELATION_ROWS = 5
"""A rubric's or source's score-vs-length correlation needs this many scored rows (2 rows give +-1.00)."""


def _group_stats(
    members: list[dict[str, Any]], kind: str, min_rows: int = MIN_GROUP_CORRELATION_ROWS
) -> dict[str, Any]:
    scored = [m for m in members if m["value"] is not None]
    out: dict[str, Any] = {"n": len(members), "failed": sum(m["reason"] is not None for m in members)}
    if kind == "grade":
        out["mean"] = fmean(m["value"] for m in scored) if scored else None
        rho = spearman([m["value"] for m in scored], [m["length"] for m in scored])
        out["length_spearman"] = rho if len(scored) >= min_rows else None
    else:
        out["a_wins"] = sum(m["winner"] == "A" for m in members) / len(members) if members else None
        out["ties"] = sum(bool(m["tie"]) for m in members) / len(members) if members else None
        longer = [m for m in members if m["winner"] in ("A", "B") and m["length_a"] != m["length_b"]]  # decided
        out["longer_wins"] = (
            fmean((m["winner"] == "A") == (m["length_a"] > m["length_b"]) for m in longer) if longer else None
        )
    return out


def _member(
    row: dict[str, Any], i: int, kind: str, cols: ReportColumns, source: str | None, rubric: Any
) -> dict[str, Any]:
    names = cols.names(row, i)
    given = row[names["rubric"]] if names["rubric"] is not None else None
    index, forced = row.get("source_index"), row.get("forced_verdicts")
    # an outcome: a score, a winner, or a tie (a tie is decided, whatever judge_error says about it)
    decided = row.get("score") is not None if kind == "grade" else row.get("winner") is not None or bool(row.get("tie"))
    failure = row.get("judge_error") or f"no verdict after {row.get('judge_failures', '?')} failed samples"
    m: dict[str, Any] = {
        "index": index if isinstance(index, int) and not isinstance(index, bool) else i,
        "instruction": _shown(row, names, "instruction", i),
        "feedback": _text(row.get("feedback")),
        "rubric": rubric_label(given if given not in (None, "") else rubric),
        "reason": None if decided else str(failure),  # why the row has no outcome
        "forced": isinstance(forced, (int, float)) and not isinstance(forced, bool) and forced > 0,
        "source": _text(row.get(source)) or "(none)" if source else None,
    }
    if kind == "grade":
        m["response"] = _shown(row, names, "response", i)
        m["value"] = _number(row, "score", i)
        m["length"] = len(m["response"])
    else:
        m["response_a"], m["response_b"] = _shown(row, names, "response_a", i), _shown(row, names, "response_b", i)
        m["length_a"], m["length_b"] = len(m["response_a"]), len(m["response_b"])
        m["value"] = _number(row, "p_a", i)
        m["winner"], m["tie"] = row.get("winner"), bool(row.get("tie"))
        m["undecided"] = tie_reason(row.get("swap_agreement")) if m["winner"] is None and m["tie"] else None
        fix = "fix: give the file prom-reward compare wrote"
        if m["winner"] not in ("A", "B", None):
            raise InputError(
                f"row {i}: 'winner' {m['winner']!r:.60} is not 'A', 'B' or null; {fix}", index=i, field="winner"
            )
        if m["value"] is not None and not 0.0 <= m["value"] <= 1.0:
            raise InputError(
                f"row {i}: 'p_a' {m['value']:g} is not a probability (0 to 1); {fix}", index=i, field="p_a"
            )
    return m


def summarize(
    rows: Iterable[dict[str, Any]],
    columns: ReportColumns | None = None,
    *,
    extremes: int = 5,
    rubric: Any = None,
    judge_format: JudgeFormat | None = None,
) -> dict[str, Any]:
    """The report's content for ``rows`` (all of one kind: grade or compare rows); ``rubric``: the rubric of rows
    without a rubric column (the job's ``--rubric``, from its manifest); ``judge_format``: the format the rows were
    judged in (its scale is the histogram's; None: the default format), a grade off its scale an ``InputError``."""
    cols = columns or ReportColumns()
    fmt = judge_format or get_judge_format(DEFAULT_FORMAT)
    members: list[dict[str, Any]] = []
    checklists: list[Any] = []
    kind = source = None
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"row {i}: expected an object, got {type(row).__name__}; fix: one object per row", index=i)
        k = "grade" if "score" in row else "compare" if "winner" in row else None
        if k is None:
            raise InputError(
                f"row {i}: neither a 'score' (prom-reward grade) nor a 'winner' (prom-reward compare) "
                f"column (columns: {sorted(row)}); fix: give the output file of one of them",
                index=i,
            )
        if kind is None:
            kind = k
            source = cols.source or next((c for c in SOURCE_COLUMNS if c in row), None)
        elif k != kind:
            raise InputError(
                f"row {i}: a {k} row in a file of {kind} rows; fix: report one kind of file at a time", index=i
            )
        members.append(_member(row, i, kind, cols, source, rubric))
        checklists.append(row.get("checklist_verdicts"))
    if kind is None:
        raise InputError("no rows to report on; fix: give a graded file with rows", field="input")
    scored = [m for m in members if m["value"] is not None]
    off = [m for m in scored if kind == "grade" and not (fmt.scale and fmt.scale[0] <= m["value"] <= fmt.scale[-1])]
    if off:  # a grade off the scale: a file judged in another format
        scale = f"scale {fmt.scale[0]}..{fmt.scale[-1]}" if fmt.scale else "no grading scale (pairwise only)"
        raise InputError(
            f"row {off[0]['index']}: score {off[0]['value']:g} is off the {scale} of judge format {fmt.name!r}; fix: "
            "name the format the file was graded in with --format",
            index=off[0]["index"],
            field="score",
        )
    out: dict[str, Any] = {
        "kind": kind,
        "format": fmt.name,
        "scale": list(fmt.scale),
        "verdict_marker": (fmt.force_prefix or "").strip() or None,
        **_group_stats(members, kind, min_rows=0),
        "source_column": source,
        # the job summary's words: judged (a score, a winner) + failed + skipped (compare's ties, by reason) = n
        "judged": sum(m["value"] is not None if kind == "grade" else m["winner"] is not None for m in members),
        "skipped": dict(sorted(Counter(m["undecided"] for m in members if m.get("undecided")).items())),
        "forced": sum(m["forced"] for m in members),
        "failures": Counter(m["reason"] for m in members if m["reason"] is not None).most_common(),
        "by_rubric": _grouped(members, "rubric", kind),
        "by_source": _grouped(members, "source", kind) if source else {},
        "checklist": checklist_summary(checklists),
    }
    out["values"] = values = [m["value"] for m in scored]
    if kind == "grade":
        out.update(
            median=median(values) if values else None,
            lengths=[m["length"] for m in scored],
            integer_scores=all(float(v).is_integer() for v in values),
        )
    else:
        out["verdicts"] = {
            **{w: sum(m["winner"] == w for m in members) for w in ("A", "B")},
            **{skip: out["skipped"].get(skip, 0) for skip in ("tie", "swap_disagreement")},
            "failed": out["failed"],
        }
        out["length_ratios"] = [math.log2(max(m["length_a"], 1) / max(m["length_b"], 1)) for m in scored]
        out["length_spearman"] = spearman(values, out["length_ratios"])
    # for verdicts, "most confident for A" holds only rows that favour A (P(A) > 0.5), and likewise for B
    high = scored if kind == "grade" else [m for m in scored if m["value"] > 0.5]
    low = scored if kind == "grade" else [m for m in scored if m["value"] < 0.5]
    out["highest"] = sorted(high, key=lambda m: (-m["value"], m["index"]))[:extremes]
    out["lowest"] = sorted(low, key=lambda m: (m["value"], m["index"]))[:extremes]
    return out


def _grouped(members: list[dict[str, Any]], key: str, kind: str, limit: int = 15) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for m in members:
        groups.setdefault(m[key], []).append(m)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    out = {name: _group_stats(ms, kind) for name, ms in ranked[:limit]}
    rest = [m for _, ms in ranked[limit:] for m in ms]
    if rest:
        out[f"({len(ranked) - limit} others)"] = _group_stats(rest, kind)
    return out


def _rates(outcomes: dict[str, list[bool | None]]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, passed in outcomes.items():
        judged = [p for p in passed if p is not None]
        rate = sum(judged) / len(judged) if judged else None
        out[key] = {"n": len(passed), "judged": len(judged), "pass_rate": rate, "undecided": len(passed) - len(judged)}
    return out


def checklist_summary(verdicts: Iterable[Sequence[dict[str, Any]] | None], limit: int = 20) -> dict[str, Any]:
    """Per criterion (the ``limit`` most frequent) and per category: rows, judged, pass rate, undecided; and the
    criteria most often undecided. Empty when no row has verdicts."""
    by: dict[str, dict[str, list[bool | None]]] = {"criterion": {}, "category": {}}
    rows = 0
    for row in verdicts:
        rows += bool(row)
        for v in row or ():
            if isinstance(v, dict):
                satisfied = v.get("satisfied")  # a pitfall passes when avoided
                passed = None if satisfied is None else bool(satisfied) != (v.get("category") == "pitfall")
                for key in by:
                    by[key].setdefault(str(v.get(key)), []).append(passed)
    if not rows:
        return {}
    criteria = _rates(by["criterion"])
    ranked = sorted(criteria.items(), key=lambda kv: (-kv[1]["n"], kv[0]))[:limit]
    undecided = sorted(((k, e["undecided"]) for k, e in criteria.items() if e["undecided"]), key=lambda kv: -kv[1])
    return {
        "rows": rows,
        "by_criterion": dict(ranked),
        "by_category": _rates(by["category"]),
        "most_undecided": undecided[:5],
    }
