"""The report in any judge format (issue 33 items 1 and 6): each file's format comes from its job record, ``--format``
names it for a file without one, a record that names another format is refused, and the score histogram and the
forced-verdict note follow the format (its scale, its verdict marker)."""

from __future__ import annotations

import json
import re

import pytest

from prom_reward.cli.main import main
from prom_reward.cli.report import job_record
from prom_reward.errors import InputError
from prom_reward.format.judge_format import get_judge_format
from prom_reward.jobs.run import grade_file
from prom_reward.report.html import render_report
from prom_reward.report.summarize import recorded_format, summarize

THREE = {"criteria": "Is it right?", "descriptions": ["wrong", "partly right", "right"]}


def _graded(tmp_path, fmt, rubric, scores):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"instruction": f"Q{i}?", "response": "A" * (i + 1)}) + "\n" for i in range(3)))
    outputs = [f"<feedback>Fine.</feedback>\n<score>{s}</score>" for s in scores]
    out = tmp_path / "graded.jsonl"
    grade_file(src, out, {"backend": "scripted", "outputs": outputs, "format": fmt}, rubric=rubric, progress=False)
    return out


def _labels(page: str) -> list[str]:
    chart = page.split('data-plot="score-distribution"')[1].split("</svg>")[0]
    return re.findall(r"<title>([^:<]+): ", chart)  # one bar per score of the scale


def test_the_report_reads_the_format_from_the_job_record(tmp_path):
    graded = _graded(tmp_path, "flow-judge-3", THREE, ["1", "3", "3"])
    out = tmp_path / "r.html"
    assert main(["report", str(graded), "-o", str(out)]) == 0
    assert _labels(out.read_text()) == ["1", "2", "3"]
    # the record decides: --format naming another format is refused with the file and both formats
    assert main(["report", str(graded), "-o", str(out), "--format", "flow-judge"]) != 0
    with pytest.raises(InputError, match="judged in format 'flow-judge-3', --format names 'flow-judge'"):
        recorded_format(job_record(graded), "flow-judge")
    assert main(["report", str(graded), "-o", str(out), "--format", "flow-judge-3"]) == 0


def test_a_foreign_file_takes_format_and_a_grade_off_the_scale_is_refused(tmp_path):
    rows = [{"instruction": "Q?", "response": "A", "score": 0.0}, {"instruction": "Q?", "response": "B", "score": 1.0}]
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.html"
    assert main(["report", str(foreign), "-o", str(out), "--format", "flow-judge-binary"]) == 0
    assert _labels(out.read_text()) == ["0", "1"]
    assert main(["report", str(foreign), "-o", str(out)]) != 0  # 0 is off Prometheus 2's 1..5
    with pytest.raises(InputError, match="score 0 is off the scale 1..5 of judge format 'prometheus2'; fix"):
        summarize(rows)
    with pytest.raises(SystemExit) as unknown:  # refused by the one --format type of every command
        main(["report", str(foreign), "-o", str(out), "--format", "prometheus3"])
    assert unknown.value.code == 2


@pytest.mark.parametrize(("fmt", "marker"), [("flow-judge", "&lt;score&gt;"), ("prometheus2", "[RESULT]")])
def test_the_forced_verdict_note_names_the_formats_marker(fmt, marker):
    rows = [{"instruction": "Q?", "response": "A", "score": 4.0, "forced_verdicts": 1}]
    f = get_judge_format(fmt)
    page = render_report(summarize(rows, judge_format=f))
    assert f"<code>{marker}</code> (the verdict marker of judge format {fmt})" in page


def test_a_recorded_format_that_cannot_be_looked_up_needs_format(tmp_path):
    graded = _graded(tmp_path, "flow-judge-3", THREE, ["1", "2", "3"])
    manifest = graded.with_name(graded.name + ".parts") / "_manifest.json"
    record = json.loads(manifest.read_text())
    record["judge"]["format"] = "my-own@0123abcd"  # e.g. a format defined in a YAML file
    manifest.write_text(json.dumps(record))
    with pytest.raises(InputError, match="names judge format 'my-own@0123abcd', which cannot be looked up.*--format"):
        recorded_format(job_record(graded), None)
    with pytest.raises(InputError, match="judged in format 'my-own@0123abcd', --format names 'flow-judge-3'"):
        recorded_format(job_record(graded), "flow-judge-3")
    assert main(["report", str(graded), "-o", str(tmp_path / "r.html"), "--format", "flow-judge-3"]) == 2


@pytest.mark.parametrize(
    ("judge", "fmt"),
    [
        ({}, "prometheus2"),
        ({"model": "flowaicom/Flow-Judge-v0.1"}, "flow-judge"),  # a record naming no format: its preset's
        ({"preset": "con-j-7b", "backend": "ScriptedBackend"}, "con-j"),  # a backend object, recorded by its kind
        ({"format": "flow-judge-3", "num_samples": 3, "sampling": {"temperature": 0}}, "flow-judge-3"),
    ],
)
def test_the_format_is_the_recorded_judge_specs(judge, fmt):
    """The report reads the recorded judge as a ``JudgeSpec`` (its format, else its preset's, else the default)."""
    assert recorded_format({"judge": judge}, None).name == fmt
    assert recorded_format(None, None).name == "prometheus2" and recorded_format(None, fmt).name == fmt
    with pytest.raises(InputError, match="its job record's judge is not one prom-reward wrote.*num_samples"):
        recorded_format({"judge": {"num_samples": 0}}, None)
