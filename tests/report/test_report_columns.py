"""The report reads the columns the jobs read (issue 44, deliverable 2): TRL's ``prompt`` / ``completion`` of a
``grade`` output and ``prompt`` / ``chosen`` / ``rejected`` of a ``compare`` output, conversational values shown as
the judge read them (the rewards' rendering), a column the job was told to read, and a column flag naming a column
that does not exist refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.cli.main import main
from prom_reward.errors import InputError
from prom_reward.jobs.parts import write_rows
from prom_reward.jobs.run import compare_file, grade_file
from prom_reward.report.summarize import ReportColumns, summarize
from tests.judges import judge_by_response

USER = [{"role": "user", "content": "Name a prime."}]


def _say(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _job(run, rows: list[dict], judge, folder: Path, **options) -> Path:
    src, out = folder / "in.jsonl", folder / "out.jsonl"
    write_rows(src, [rows])
    run(str(src), str(out), judge, progress=False, rubric="helpfulness", **options)
    return out


def _graded(folder: Path, rows: list[dict], **options) -> Path:
    return _job(grade_file, rows, judge_by_response({"7": "Right. [RESULT] 5", "9": "Wrong. [RESULT] 1"}), folder,
                **options)  # fmt: skip


def _compared(folder: Path) -> Path:
    judge = PrometheusJudge(backend=ScriptedBackend(outputs=["[RESULT] A", "[RESULT] B"]), max_retries=0)
    rows = [{"prompt": USER, "chosen": _say("Seven."), "rejected": _say("Nine.")}]
    return _job(compare_file, rows, judge, folder)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# (name, rows of the job, the job's options, the instruction and the responses the report shows)
GRADED = [
    ("TRL standard", [{"prompt": "Name a prime.", "completion": "7"}], {}, "Name a prime.", ["7"]),
    ("TRL conversational", [{"prompt": USER, "completion": _say("7")}], {}, "Name a prime.", ["7"]),
    (
        "a column named for the job",
        [{"instruction": "ignored", "prompt": USER, "completion": _say("9")}],
        {"instruction_column": "prompt"},
        "Name a prime.",
        ["9"],
    ),
]


@pytest.mark.parametrize(("rows", "options", "instruction", "responses"), [c[1:] for c in GRADED],
                         ids=[c[0] for c in GRADED])  # fmt: skip
def test_the_report_of_a_trl_grade_output_shows_its_instruction_and_response(tmp_path, rows, options, instruction,
                                                                             responses):  # fmt: skip
    out = _graded(tmp_path, rows, **options)
    page = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    s = summarize(_rows(out), ReportColumns(**{k.removesuffix("_column"): v for k, v in options.items()}))
    assert [m["instruction"] for m in s["highest"]] == [instruction]
    assert [m["response"] for m in s["highest"]] == responses
    text = page.read_text()
    assert instruction in text and '"role"' not in text and "&quot;role&quot;" not in text


def test_the_report_of_a_trl_compare_output_shows_both_responses(tmp_path):
    out = _compared(tmp_path)
    s = summarize(_rows(out))
    assert s["verdicts"]["A"] == 1  # both orders agree on chosen
    m = s["highest"][0]
    assert (m["instruction"], m["response_a"], m["response_b"]) == ("Name a prime.", "Seven.", "Nine.")
    assert (m["length_a"], m["length_b"]) == (6, 5)  # the text's length, not the JSON's
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    assert "Seven." in (tmp_path / "r.html").read_text()


def test_a_conversational_column_named_by_flag_is_rendered_not_json(tmp_path):
    out = _graded(tmp_path, [{"prompt": USER, "completion": _say("7")}])
    s = summarize(_rows(out), ReportColumns(instruction="prompt", response="completion"))
    assert (s["highest"][0]["instruction"], s["highest"][0]["response"]) == ("Name a prime.", "7")
    assert main(["report", str(out), "-o", str(tmp_path / "r.html"), "--instruction-col", "prompt"]) == 0
    assert "[{" not in (tmp_path / "r.html").read_text()


def test_the_report_refuses_a_row_holding_a_role_under_both_names():
    rows = [{"instruction": "a", "prompt": "b", "response": "7", "score": 5.0}]
    with pytest.raises(InputError, match="'instruction' and 'prompt' both hold the instruction"):
        summarize(rows)
    assert summarize(rows, ReportColumns(instruction="prompt"))["highest"][0]["instruction"] == "b"
