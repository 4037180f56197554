"""A lone surrogate (a JSON input's ``"\\ud800"``: not valid Unicode, UTF-8 cannot encode it) wherever a job's
judge would read it (instruction, response, completion, reference, a row's rubric) stops the job before any judge
call and before the output is touched, naming the row and the column, in all three jobs."""

from __future__ import annotations

import json

import pytest

from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import InputError
from prom_reward.jobs.run import compare_file, grade_file, pairs_file

BAD = "a\ud800"
RUBRIC = "[Kind?]\nScore 1: " + BAD + "\nScore 2: b\nScore 3: c\nScore 4: d\nScore 5: e"
GRADE = {"instruction": "Q?", "response": "good"}
COMPARE = {"instruction": "Q?", "response_a": "good", "response_b": "bad"}
PAIRS = {"prompt": "Q?", "completions": ["good", "bad"]}
BASE = {grade_file: GRADE, compare_file: COMPARE, pairs_file: PAIRS}

CASES = [
    (grade_file, {**GRADE, "response": BAD}, "column 'response': response holds a lone surrogate"),
    (grade_file, {**GRADE, "reference_answer": BAD}, "column 'reference_answer': reference_answer holds a lone"),
    (grade_file, {**GRADE, "rubric": RUBRIC}, "rubric: rubric score 1 description holds a lone surrogate"),
    (compare_file, {**COMPARE, "response_b": BAD}, "column 'response_b': response_b holds a lone surrogate"),
    (compare_file, {**COMPARE, "rubric": RUBRIC}, "rubric: rubric score 1 description holds a lone surrogate"),
    (pairs_file, {**PAIRS, "prompt": BAD}, "column 'prompt': prompt holds a lone surrogate"),
    (pairs_file, {**PAIRS, "completions": ["good", BAD]}, "column 'completions[1]': completions[1] holds a lone"),
    (pairs_file, {**PAIRS, "reference_answer": BAD}, "column 'reference_answer': reference_answer holds a lone"),
    (pairs_file, {**PAIRS, "rubric": RUBRIC}, "rubric: rubric score 1 description holds a lone surrogate"),
]


@pytest.mark.parametrize(("run", "row", "said"), CASES)
def test_a_lone_surrogate_the_judge_would_read_stops_the_job_first(run, row, said, tmp_path):
    seen = []
    judge = {"backend": ScriptedBackend(respond=lambda r, i: seen.append(r) or "Fine. [RESULT] 4")}
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    first = {**BASE[run], "rubric": "helpfulness"}
    src.write_text(json.dumps(first) + "\n" + json.dumps(row) + "\n")
    opts = {} if "rubric" in row else {"rubric": "helpfulness"}
    with pytest.raises(InputError) as e:
        run(src, out, judge, progress=False, **opts)
    assert "in.jsonl:2: row 1: " in str(e.value) and said in str(e.value) and "fix: " in str(e.value), e.value
    assert seen == [] and not out.exists()
