"""The jobs in any judge format (``prom_reward.jobs``, issue 33 item 6) with a scripted judge: the format owns the
rubric check (a row's misfit fails alone with the format's problem, a rubric for every row that does not fit refuses
the job before the output is touched), the probabilities' columns follow the format's scale, and a format that
cannot do the job is refused at start naming what it supports."""

from __future__ import annotations

import json

import pytest

from prom_reward.backends.base import Completion, GenerationResult, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import ConfigError
from prom_reward.jobs.run import compare_file, grade_file, pairs_file
from prom_reward.jobs.source import read_rows

THREE = {"criteria": "Is it right?", "descriptions": ["wrong", "partly right", "right"]}
TWO = {"criteria": "Is it right?", "descriptions": ["fail: wrong", "pass: right"]}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _flow(score: str) -> str:
    return f"<feedback>Checked.</feedback>\n<score>{score}</score>"


@pytest.mark.parametrize(
    ("fmt", "rubric", "output", "score"),
    [
        ("flow-judge", "helpfulness", _flow("4"), 4.0),
        ("flow-judge-3", THREE, _flow("2"), 2.0),
        ("flow-judge-binary", TWO, _flow("0"), 0.0),
        ("prometheus2", "helpfulness", "Fine. [RESULT] 3", 3.0),
        ("m-prometheus", "helpfulness", "Fine. [RESULT] 5", 5.0),
    ],
)
def test_grade_job_on_each_scale_with_a_rubric_that_fits(tmp_path, fmt, rubric, output, score):
    src = _write(tmp_path / "in.jsonl", [{"instruction": "Q?", "response": "A"}])
    s = grade_file(
        src,
        tmp_path / "o.jsonl",
        {"backend": "scripted", "outputs": [output], "format": fmt},
        rubric=rubric,
        progress=False,
    )
    (row,) = read_rows(tmp_path / "o.jsonl")
    assert (row["score"], row["judge_error"], s.failed) == (score, None, 0)


@pytest.mark.parametrize(
    ("fmt", "rubric", "says"),
    [
        ("flow-judge-3", "helpfulness", "flow-judge-3 grades need 3 score descriptions"),
        ("flow-judge-binary", THREE, "flow-judge-binary grades need 2 score descriptions"),
        ("prometheus2", THREE, "prometheus2 grades need 5"),
    ],
)
def test_a_rubric_for_every_row_that_does_not_fit_refuses_the_job_at_start(tmp_path, fmt, rubric, says):
    calls = []
    backend = ScriptedBackend(respond=lambda request, i: calls.append(i) or _flow("1"))
    src, out = _write(tmp_path / "in.jsonl", [{"instruction": "Q?", "response": "A"}]), tmp_path / "o.jsonl"
    with pytest.raises(ConfigError, match=f"rubric: .*{says}.*judge format '{fmt}'"):
        grade_file(src, out, {"backend": backend, "format": fmt}, rubric=rubric, progress=False)
    assert calls == [] and not out.exists()


def test_a_rows_rubric_that_does_not_fit_fails_that_row_alone(tmp_path):
    rows = [
        {"instruction": "Q0?", "response": "A", "rubric": THREE},
        {"instruction": "Q1?", "response": "A", "rubric": "helpfulness"},  # five descriptions: not flow-judge-3's
        {"instruction": "Q2?", "response": "A", "rubric": THREE},
    ]
    judge = {"backend": "scripted", "outputs": [_flow("3")] * 3, "format": "flow-judge-3"}
    s = grade_file(_write(tmp_path / "in.jsonl", rows), tmp_path / "o.jsonl", judge, progress=False)
    got = list(read_rows(tmp_path / "o.jsonl"))
    assert [r["score"] for r in got] == [3.0, None, 3.0] and s.failed == 1
    assert got[1]["judge_error"].startswith("rubric: flow-judge-3 grades need 3 score descriptions")
    assert got[0]["judge_error"] is None and got[2]["judge_error"] is None


@pytest.mark.parametrize(
    ("fmt", "rubric", "keys"), [("flow-judge-binary", TWO, {"0", "1"}), ("flow-judge-3", THREE, {"1", "2", "3"})]
)
@pytest.mark.parametrize("out", ["o.jsonl", "o.parquet"])
def test_grade_probabilities_have_one_key_per_score_of_the_formats_scale(tmp_path, fmt, rubric, keys, out):
    head = "<feedback>Fine.</feedback>\n<score>"

    class Logprobs(ScriptedBackend):
        def generate(self, requests):
            tokens = (
                TokenLogprobs(head, -0.1, {}),
                TokenLogprobs("1", -0.2, {"1": -0.2, "0": -1.8, "2": -2.5}),
                TokenLogprobs("</score>", -0.1, {}),
            )
            return [GenerationResult((Completion(f"{head}1</score>", logprobs=tokens),)) for _ in requests]

    src = _write(tmp_path / "in.jsonl", [{"instruction": "Q?", "response": "A"}])
    judge = {"backend": Logprobs(outputs=[]), "expected_score": True, "format": fmt}
    grade_file(src, tmp_path / out, judge, rubric=rubric, progress=False)
    (row,) = read_rows(tmp_path / out)
    assert row["score"] == 1.0 and set(row["probabilities"]) == keys
    assert row["probabilities"]["1"] > 0.5 and row["expected_score"] is not None


def test_compare_job_in_a_pairwise_only_format_ignores_the_rubric_it_has_no_slot_for(tmp_path):
    rows = [{"instruction": "Q?", "response_a": "a", "response_b": "b"}]
    judge = {"backend": "scripted", "outputs": ["**Reasoning:** B is right.\n\n**Result:** B"] * 2, "format": "selene"}
    s = compare_file(_write(tmp_path / "in.jsonl", rows), tmp_path / "o.jsonl", judge, rubric=THREE, progress=False)
    (row,) = read_rows(tmp_path / "o.jsonl")
    assert row["winner"] is None and row["tie"] and s.failed == 0  # B, then B with the order swapped: a tie


@pytest.mark.parametrize(
    ("job", "fmt", "supports"),
    [("grade", "selene", "relative"), ("compare", "flow-judge", "absolute"), ("pairs", "selene", "relative")],
)
def test_a_format_that_cannot_do_the_job_is_refused_at_start(tmp_path, job, fmt, supports):
    src, out = _write(tmp_path / "in.jsonl", [{"instruction": "Q?"}]), tmp_path / "o.jsonl"
    run = {"grade": grade_file, "compare": compare_file, "pairs": pairs_file}[job]
    with pytest.raises(ConfigError, match=f"judge format '{fmt}' does not judge .*it supports {supports}"):
        run(src, out, {"backend": "scripted", "outputs": ["x"], "format": fmt}, rubric="helpfulness", progress=False)
    assert not out.exists()
