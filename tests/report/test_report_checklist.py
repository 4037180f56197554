"""The report's checklist section from a graded file with checklist rows: pass rates per category and criterion
(a pitfall passes when avoided), the most undecided criteria; no section for a file without checklists."""

from __future__ import annotations

import pytest

from prom_reward.report.html import render_report
from prom_reward.report.summarize import summarize


def row(i: int, score: float | None, verdicts: list[dict] | None) -> dict:
    error = None if score is not None else "essential criterion 0 ..."
    return {"source_index": i, "instruction": "Q?", "response": f"r{i}", "score": score, "feedback": "f",
            "judge_error": error, "checklist_verdicts": verdicts}  # fmt: skip


def v(criterion: str, category: str, satisfied: bool | None) -> dict:
    return {"criterion": criterion, "category": category, "weight": 1.0, "score": None, "satisfied": satisfied,
            "error": None}  # fmt: skip


ROWS = [
    row(0, 4.0, [v("Says <4>", "essential", True), v("Is rude", "pitfall", False)]),
    row(1, 2.0, [v("Says <4>", "essential", False), v("Is rude", "pitfall", True)]),
    row(2, None, [v("Says <4>", "essential", None), v("Is rude", "pitfall", False)]),
    row(3, 3.0, None),  # a row without a checklist
]


def test_the_checklist_section_gives_pass_rates_per_category_and_criterion():
    s = summarize(ROWS, rubric="helpfulness")
    c = s["checklist"]
    assert c["rows"] == 3
    assert c["by_category"]["essential"] == {"n": 3, "judged": 2, "pass_rate": 0.5, "undecided": 1}
    assert c["by_category"]["pitfall"]["pass_rate"] == pytest.approx(2 / 3)  # avoided in 2 of 3
    assert c["by_criterion"]["Says <4>"]["undecided"] == 1
    assert c["most_undecided"] == [("Says <4>", 1)]
    page = render_report(s)
    assert "<h2>Checklist</h2>" in page and "Says &lt;4&gt;" in page and "Says <4>" not in page


def test_no_section_without_checklists():
    s = summarize([row(0, 4.0, None)], rubric="helpfulness")
    assert s["checklist"] == {} and "<h2>Checklist</h2>" not in render_report(s)
