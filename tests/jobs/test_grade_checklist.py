"""``grade`` with a checklist column (scripted judge with known per-criterion verdicts): per-criterion verdicts
and the aggregate in the output (JSON lines and Parquet), plain rows beside them, a bad checklist refused
before anything is written, a row whose criterion the transport failed judged again by ``--resume``."""

from __future__ import annotations

import re

import pytest

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import InputError
from prom_reward.jobs.run import grade_file
from prom_reward.jobs.source import read_rows
from tests.jobs.helpers import write
from tests.judges import NO_VERDICT, response_of

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3},  # one type per column: Parquet
             {"criterion": "Shows work", "category": "important", "weight": 1},
             {"criterion": "Is rude", "category": "pitfall", "weight": 1}]  # fmt: skip
VERDICTS = {("4 because 2+2=4", "Says 4"): 5, ("4 because 2+2=4", "Shows work"): 5, ("4 because 2+2=4", "Is rude"): 1,
            ("4, dummy", "Says 4"): 5, ("4, dummy", "Shows work"): 1, ("4, dummy", "Is rude"): 5,
            ("5", "Shows work"): 3, ("5", "Is rude"): 1}  # fmt: skip
ROWS = [
    {"instruction": "2+2?", "response": "4 because 2+2=4", "checklist": CHECKLIST},
    {"instruction": "2+2?", "response": "plain row"},
    {"instruction": "2+2?", "response": "4, dummy", "checklist": CHECKLIST},
    {"instruction": "2+2?", "response": "5", "checklist": CHECKLIST},
]


def judge(seen: list[GenerationRequest], down: bool = False) -> ScriptedBackend:
    def respond(request: GenerationRequest, i: int) -> str:
        seen.append(request)
        m = re.search(r"\[Does the response (?:satisfy this criterion|fall into this pitfall): (.*?)\?\]", request.user)
        if m is None:
            return "Plain. [RESULT] 3"
        score = VERDICTS.get((response_of(request), m.group(1)))
        return NO_VERDICT if score is None else f"Judged. [RESULT] {score}"

    return ScriptedBackend(respond=respond)


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_checklist_rows_get_per_criterion_verdicts_and_the_aggregate(tmp_path, suffix):
    seen: list[GenerationRequest] = []
    src = write(tmp_path / "in.jsonl", ROWS)
    summary = grade_file(src, tmp_path / f"out.{suffix}", {"backend": judge(seen), "max_retries": 0},
                         rubric="helpfulness", progress=False)  # fmt: skip
    got = list(read_rows(tmp_path / f"out.{suffix}"))
    assert [r["checklist_score"] for r in got] == [1.0, None, 0.5, None]
    assert [r["score"] for r in got] == [5.0, 3.0, 3.0, None]  # 1 + 4 * aggregate; the plain row its grade
    assert got[1]["checklist_verdicts"] is None
    verdicts = got[2]["checklist_verdicts"]
    assert [(v["criterion"], v["category"], v["weight"], v["score"], v["satisfied"]) for v in verdicts] == [
        ("Says 4", "essential", 3.0, 5.0, True),
        ("Shows work", "important", 1.0, 1.0, False),
        ("Is rude", "pitfall", 1.0, 5.0, True),
    ]
    assert got[3]["judge_error"].startswith("essential criterion 0 ('Says 4') could not be judged")
    assert got[3]["judge_failures"] == 1 and got[3]["checklist_verdicts"][0]["score"] is None
    assert got[2]["feedback"].splitlines()[1] == "[1] not satisfied: Judged."
    assert summary.failed == 1
    assert len(seen) == 10  # 3 criteria x 3 checklist rows + the plain row: each asked once


@pytest.mark.parametrize(
    ("checklist", "fragment"),
    [
        ([{"criterion": "Says 4", "weight": "lots"}], "criterion 0 ('Says 4'): weight: expected a finite number > 0"),
        ([{"criterion": "Says 4", "category": "vital"}], "category: expected one of essential, important"),
        ({"criterion": "Says 4"}, "checklist: expected a list of criteria"),
        ([], "expected at least one criterion"),
    ],
)
def test_a_bad_checklist_stops_the_job_before_anything_is_written(tmp_path, checklist, fragment):
    seen: list[GenerationRequest] = []
    src = write(tmp_path / "in.jsonl", [ROWS[0], {**ROWS[2], "checklist": checklist}])
    with pytest.raises(InputError) as e:
        grade_file(src, tmp_path / "out.jsonl", {"backend": judge(seen)}, progress=False)
    message = str(e.value)
    assert "in.jsonl:2: row 1: column 'checklist': " in message and fragment in message
    assert message.endswith("name the right column with checklist_column")  # Python's name, the flag on the CLI:
    assert e.value.said({"checklist_column": "--checklist-col"}).endswith("name the right column with --checklist-col")
    assert seen == [] and not (tmp_path / "out.jsonl").exists()


def test_a_checklist_row_the_transport_failed_is_judged_again_on_resume(tmp_path):
    src = write(tmp_path / "in.jsonl", [ROWS[0], ROWS[2]])
    out = tmp_path / "out.jsonl"

    def down(request: GenerationRequest, i: int) -> str:
        from prom_reward.errors import BackendError

        raise BackendError("judge unreachable")

    down_judge = {"backend": ScriptedBackend(respond=down), "max_retries": 0}
    first = grade_file(src, out, down_judge, outage={"budget_s": 0}, progress=False)
    rows = list(read_rows(out))
    assert all(r["score"] is None and r["judge_error"].startswith("backend failed") for r in rows)
    assert first.failed == 2
    seen: list[GenerationRequest] = []
    grade_file(src, out, {"backend": judge(seen), "max_retries": 0}, resume=True, progress=False)
    assert [r["checklist_score"] for r in read_rows(out)] == [1.0, 0.5]
    assert len(seen) == 6


def test_a_custom_checklist_column_and_aggregation(tmp_path):
    src = write(tmp_path / "in.jsonl", [{"instruction": "2+2?", "response": "4, dummy", "items": CHECKLIST}])
    grade_file(src, tmp_path / "o.jsonl", {"backend": judge([]), "max_retries": 0}, checklist_column="items",
               checklist_aggregation="minimum", progress=False)  # fmt: skip
    assert list(read_rows(tmp_path / "o.jsonl"))[0]["checklist_score"] == 0.0


def test_the_grade_command_takes_the_checklist_flags(tmp_path):
    from prom_reward.cli.jobs import _kind
    from prom_reward.cli.main import build_parser

    args = build_parser().parse_args(["grade", "in.jsonl", "-o", "out.jsonl", "--checklist-col", "items",
                                      "--checklist-mode", "implicit", "--checklist-aggregation", "gate"])  # fmt: skip
    job = _kind(args)
    assert (job.checklist_column, job.checklist_mode, job.checklist_aggregation) == ("items", "implicit", "gate")
