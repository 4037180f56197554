"""The shared scripted judges of tests/judges.py answer from the text they are asked about."""

from __future__ import annotations

from tests.judges import judge_by_rank, judge_by_response


def test_judge_by_response_reads_the_response_and_records_requests():
    seen: list = []
    judge = judge_by_response({"4": "Right. [RESULT] 5", "five\nlines": "Wrong. [RESULT] 1"}, seen=seen)
    grades = judge.grade(["2+2?", "2+2?", "2+2?"], ["4", "five\nlines", "other"], "helpfulness")
    assert [g.score for g in grades] == [5.0, 1.0, None]
    assert len(seen) == 3 and "###Response to evaluate:\n4\n" in seen[0].user


def test_judge_by_rank_grades_and_compares():
    judge = judge_by_rank({"good": 5, "fair": 3, "bad": 1})
    assert [g.score for g in judge.grade(["q"] * 3, ["good one", "fair one", "bad one"], "helpfulness")] == [5, 3, 1]
    verdicts = judge.compare(["q", "q", "q"], ["bad", "good", "fair"], ["good", "bad", "fair"], "helpfulness")
    assert [v.winner for v in verdicts] == ["B", "A", None]
    prefers_a = judge_by_rank({"good": 5, "fair": 3}, tie="A")
    assert [v.winner for v in prefers_a.compare(["q", "q"], ["fair", "fair"], ["fair", "good"], "helpfulness")] == [
        "A",
        "B",
    ]
    assert prefers_a.compare(["q"], ["odd"], ["good"], "helpfulness")[0].winner is None
