"""Every job counts its outcomes once, in one vocabulary (``jobs.spec.FAILED``, ``SKIPPED``): the summary (its
object, its text line), the output file, the skip file and the report agree, and judged + failed + skipped are
all the outcomes (a row of grade and compare, a candidate pair of pairs). Generated from the registries: every
``JobKind``, and for pairs every strategy and layout of ``preferences.config``; a new one joins (and fails here
until ``INPUTS`` says what its rows are)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.judge import PrometheusJudge
from prom_reward.jobs.run import compare_file, grade_file, pairs_file
from prom_reward.jobs.source import read_rows
from prom_reward.jobs.spec import FAILED, SKIPPED, JobKind
from prom_reward.preferences.config import LAYOUTS, STRATEGIES
from prom_reward.report.summarize import summarize
from tests.jobs.helpers import write
from tests.judges import pair_of, response_of

RANK = {"good": 5, "fair": 3, "bad": 1}
"""What the judge thinks of a response by its first word; "mute" gets no verdict."""


def _respond(request, i):
    if "###Response to evaluate:\n" in request.user:
        word = response_of(request).split()[0]
        return f"Graded. [RESULT] {RANK[word]}" if word in RANK else "I cannot tell."
    a, b = (RANK.get(x.split()[0]) for x in pair_of(request))
    if a is None or b is None:
        return "I cannot tell."
    return "Compared. [RESULT] " + ("B" if b > a else "A")  # equal: "A" in both orders, which disagree


def _judge(**options) -> PrometheusJudge:
    return PrometheusJudge(backend=ScriptedBackend(respond=_respond), max_retries=0, max_tie_rounds=1, **options)


GROUPS = [["good a", "bad b"], ["fair c", "fair d"], ["mute e", "good f"], ["good g"]]
"""Pairs' prompts and completions: a pair, a tie (best_vs_worst) or swap disagreement (all_pairs), a failure,
too few completions."""


def _pairs_rows(layout: str) -> list[dict]:
    if layout == "wide":
        return [{"prompt": f"P{k}", "completions": cs} for k, cs in enumerate(GROUPS)]
    return [{"prompt": f"P{k}", "completion": c} for k, cs in enumerate(GROUPS) for c in cs]


INPUTS = {
    "grade": [{"instruction": "Q?", "response": r} for r in ("good 1", "bad 2", "mute 3", "fair 4")],
    "compare": [
        {"instruction": "Q?", "response_a": a, "response_b": b}
        for a, b in (("good 1", "bad 1"), ("bad 2", "good 2"), ("fair 3", "fair 3"), ("mute 4", "good 4"))
    ],
}
RUN = {"grade": grade_file, "compare": compare_file, "pairs": pairs_file}

CASES = [pytest.param(kind.name, {}, id=kind.name) for kind in JobKind.__subclasses__() if kind.name != "pairs"] + [
    pytest.param("pairs", {"strategy": s, "layout": lay}, id=f"pairs-{s}-{lay}") for s in STRATEGIES for lay in LAYOUTS
]


def _text_counts(text: str) -> tuple[int, int, int, int]:
    """(outcomes, judged, failed, skipped) from the summary's text line."""
    found = re.search(
        r"(\d+) (?:rows|candidate pairs): (\d+) judged, (\d+) failed \(see judge_error\), (\d+) skipped", text
    )
    assert found, text
    return tuple(int(g) for g in found.groups())  # type: ignore[return-value]


@pytest.mark.parametrize("job, options", CASES)
def test_the_counts_agree_across_summary_output_skip_file_and_report(tmp_path, job, options):
    layout = options.get("layout")
    rows = INPUTS[job] if job != "pairs" else _pairs_rows(layout)
    src, out = write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    s = RUN[job](src, out, _judge(), rubric="helpfulness", batch_size=3, progress=False, **options)
    got = list(read_rows(out))
    records = list(read_rows(tmp_path / "out.skipped.jsonl")) if job == "pairs" else []
    outcomes = len(got) + len(records)

    assert s.rows == len(rows)  # input rows, whatever the layout
    assert s.judged + s.failed + sum(s.skipped.values()) == outcomes == _text_counts(s.text())[0]
    assert _text_counts(s.text())[1:] == (s.judged, s.failed, sum(s.skipped.values()))
    assert set(s.skipped) <= set(SKIPPED) and s.failed > 0 and s.judged > 0 and (bool(s.skipped) or job == "grade")
    if job == "pairs":
        assert s.judged == s.pairs == len(got)
        assert s.failed == sum(r["reason"] in FAILED for r in records)
        assert s.skipped == dict(Counter(r["reason"] for r in records if r["reason"] not in FAILED))
        # source_index is the input row (a long-layout group's first row), in the pairs and the skip records alike
        firsts = {next(i for i, r in enumerate(rows) if r["prompt"] == f"P{g}") for g in range(len(GROUPS))}
        assert {rec["source_index"] for rec in [*got, *records]} == firsts
        assert all(rows[p["source_index"]]["prompt"] == p["prompt"] for p in got)
        return
    report = summarize(got)
    assert (report["n"], report["judged"], report["failed"], report["skipped"]) == (
        s.rows,
        s.judged,
        s.failed,
        s.skipped,
    )
    if job == "compare":
        assert s.skipped == {"swap_disagreement": 1} and report["verdicts"]["swap_disagreement"] == 1


def test_grade_expected_without_logprobs_counts_the_rows_and_says_why(tmp_path, caplog):
    """A judge that returns no logprobs (the scripted backend): the rows keep their scores, ``expected_score``
    null, and the summary counts them with the reason; the job warns once."""
    src = write(tmp_path / "in.jsonl", INPUTS["grade"])
    with caplog.at_level("WARNING", logger="prom_reward.jobs.summary"):
        s = grade_file(src, tmp_path / "out.jsonl", _judge(expected_score=True), rubric="helpfulness", batch_size=1)
    got = list(read_rows(tmp_path / "out.jsonl"))
    assert [r["score"] for r in got] == [5.0, 1.0, None, 3.0] and all(r["expected_score"] is None for r in got)
    ((why, n),) = s.no_expected.items()
    assert n == 3 and why.startswith("the judge returned no logprobs for the verdict token") and "--max-logprobs" in why
    assert f"3 rows without an expected score: {why}" in s.text()
    assert [r.getMessage() for r in caplog.records].count(f"grade: rows without an expected score: {why}") == 1


def test_grade_expected_against_a_server_without_logprobs_is_refused_at_start(tmp_path, capsys):
    from prom_reward.cli.main import main
    from tests.jobs.helpers import argv, judge_server

    server = judge_server()  # answers without logprobs
    try:
        src = write(tmp_path / "in.jsonl", INPUTS["grade"])
        code = main(argv("grade", src, tmp_path / "out.jsonl", server.url, "--expected"))
        chats = len(server.bodies("/v1/chat/completions"))
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert code == 2 and "--expected: the judge returned no logprobs for the verdict token" in err, err
    assert "--max-logprobs" in err and "without --expected" in err
    assert chats == 1 and not (tmp_path / "out.jsonl").exists()  # the start-up check alone: no row judged
