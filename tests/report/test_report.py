"""The HTML report: what it computes from grade and compare output, bad files, a self-contained page that escapes
what it shows, and the CLI on the files ``grade_rows`` / ``compare_rows`` write. The browser test is
test_report_browser.py."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from scipy.stats import spearmanr

from prom_reward import PrometheusJudge
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.cli.main import main
from prom_reward.errors import InputError
from prom_reward.jobs.parts import write_rows
from prom_reward.jobs.run import compare_file, grade_file
from prom_reward.jobs.source import read_rows
from prom_reward.report.html import render_report
from prom_reward.report.summarize import ReportColumns, rubric_label, summarize
from tests.judges import judge_by_response, pair_of

ROLLOUTS = [
    {"instruction": "Name a prime.", "response": "7", "rubric": "factual_validity", "source": "policy-a"},
    {
        "instruction": "Name a prime.",
        "response": "Seven is a prime number, as it has exactly two divisors.",
        "rubric": "factual_validity",
        "source": "policy-b",
    },
    {
        "instruction": "Say hi <politely>.",
        "response": "<script>alert('hi')</script>",
        "rubric": "helpfulness",
        "source": "policy-a",
    },
    {"instruction": "Name a prime.", "response": "9", "rubric": "factual_validity", "source": "policy-b"},
    {
        "instruction": "Write a haiku.",
        "response": "Rain on the old roof / a slow drip counts the hours / night forgets the day",
        "rubric": {"criteria": "Is it a haiku?", **{f"score{k}_description": f"level {k}" for k in range(1, 6)}},
        "source": "policy-a",
    },
]
TABLE = {
    "7": "Correct. [RESULT] 4",
    "Seven is a prime number, as it has exactly two divisors.": "Right and explained. [RESULT] 5",
    "9": "Nine is not prime. [RESULT] 1",
    "Rain on the old roof / a slow drip counts the hours / night forgets the day": "A fine haiku. [RESULT] 5",
}


def _job(run, rows: list[dict], judge, **options) -> list[dict]:
    """The rows the job engine writes for ``rows`` (through a temporary .jsonl input and output)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "in.jsonl", Path(d) / "out.jsonl"
        write_rows(src, [rows])
        run(str(src), str(out), judge, progress=False, **options)
        return list(read_rows(out))


def graded_rows() -> list[dict]:
    return _job(grade_file, [dict(r) for r in ROLLOUTS], judge_by_response(TABLE))


def compared_rows() -> list[dict]:
    def respond(request, i):
        a, b = pair_of(request)
        if "?" in a or "?" in b:
            return "Cannot tell."
        return f"The longer one. [RESULT] {'A' if len(a) > len(b) else 'B'}"

    rows = [
        {
            "instruction": "Explain tides.",
            "response_a": "The moon pulls the sea." * k,
            "response_b": "Moon.",
            "source": "s1" if k % 2 else "s2",
        }
        for k in range(1, 5)
    ]
    rows.append({"instruction": "Explain tides.", "response_a": "?", "response_b": "Gravity.", "source": "s1"})
    judge = PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)
    return _job(compare_file, rows, judge, rubric="helpfulness", swap=True)


def test_grade_summary():
    s = summarize(graded_rows())
    assert s["kind"] == "grade" and s["n"] == 5 and s["failed"] == 1 and s["integer_scores"]
    assert s["failures"] == [
        ("no verdict in 1 sample(s) (last: prometheus2: no '[RESULT] 1-5' verdict at the end of the feedback)", 1)
    ]
    assert s["mean"] == pytest.approx((4 + 5 + 1 + 5) / 4) and s["median"] == 4.5
    scored = [(g["score"], len(g["response"])) for g in graded_rows() if g["score"] is not None]
    assert s["length_spearman"] == pytest.approx(spearmanr(*zip(*scored, strict=True))[0])
    assert [m["index"] for m in s["highest"]] == [1, 4, 0, 3] and [m["index"] for m in s["lowest"]][:2] == [3, 0]
    assert s["highest"][0]["feedback"] == "Right and explained."
    assert s["source_column"] == "source"
    assert s["by_source"]["policy-a"] == {"n": 3, "failed": 1, "mean": 4.5, "length_spearman": None}  # 2 scored
    many = summarize(graded_rows() * 3)["by_source"]["policy-a"]  # 6 scored rows: enough for a correlation
    assert many["length_spearman"] == pytest.approx(1.0)
    assert set(s["by_rubric"]) == {"factual_validity", "helpfulness", "Is it a haiku?"}
    assert s["by_rubric"]["factual_validity"]["mean"] == pytest.approx(10 / 3)


def test_compare_summary():
    s = summarize(compared_rows())
    assert s["kind"] == "compare" and s["verdicts"] == {"A": 4, "B": 0, "tie": 0, "swap_disagreement": 0, "failed": 1}
    assert s["longer_wins"] == 1.0 and s["failures"][0][0].startswith("no verdict")
    assert s["by_source"]["s1"]["n"] == 3 and s["by_source"]["s1"]["failed"] == 1
    assert s["length_spearman"] is None  # the judge was sure every time: P(A) = 1 throughout


@pytest.mark.parametrize(
    "rows, match",
    [
        ([{"score": 3.0}, {"winner": "A"}], "row 1: a compare row in a file of grade rows"),
        ([{"instruction": "q"}], "row 0: neither a 'score'"),
        ([], "no rows"),
        ([{"score": "high"}], "row 0: 'score' must be a number"),
        ([["not", "a", "row"]], "row 0: expected an object"),
    ],
)
def test_bad_rows_name_the_row(rows, match):
    with pytest.raises(InputError, match=match):
        summarize(rows)


@pytest.mark.parametrize(
    "value, label",
    [
        ("helpfulness", "helpfulness"),
        ({"criteria": "Kind?", "score1_description": "no"}, "Kind?"),
        ("", "(none)"),
        ('{"criteria": "As JSON text?"}', "As JSON text?"),
        ("[Bracketed criteria]\nScore 1: x", "Bracketed criteria"),
        ("x" * 100, "x" * 79 + "…"),
    ],
)
def test_rubric_labels(value, label):
    assert rubric_label(value) == label


def test_page_is_self_contained_and_escapes_what_it_shows():
    probe = {"judge": "j", "date": "2026-01-01", "seconds": 3.0, "llmbar": None, "shifts": None}
    rows = graded_rows() + [
        {
            "instruction": "Say hi <politely>.",
            "response": "<script>alert('hi')</script>",
            "rubric": "<i>r</i>",
            "score": 2.0,
            "feedback": "<img src=x onerror=alert(1)>",
        }
    ]
    page = render_report(summarize(rows), probe, title="<b>t</b>")
    assert "<script" not in page and "&lt;script&gt;alert(&#x27;hi&#x27;)&lt;/script&gt;" in page
    assert "Say hi &lt;politely&gt;." in page and "&lt;b&gt;t&lt;/b&gt;" in page and "&lt;i&gt;r&lt;/i&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page
    for external in ("http:", "https:", "<link", "@import", "url("):
        assert external not in page
    assert re.search(r"<[a-z]+[^<>]*\s(src|href)=", page) is None  # no tag loads anything
    assert page.count('<svg class="plot"') == 2 and "Hacking probe" in page


def test_cli_writes_the_report_from_jsonl_and_parquet(tmp_path, capsys):
    probe = tmp_path / "probe.json"
    probe.write_text(
        json.dumps(
            {
                "judge": "j",
                "date": "2026-01-01",
                "seconds": 3.0,
                "llmbar": None,
                "shifts": {
                    "score": "score",
                    "n_items": 2,
                    "original_mean": 3.0,
                    "original_failed": 0,
                    "edits": {
                        "pad_2x": {
                            "n": 2,
                            "failed": 0,
                            "mean_shift": 0.5,
                            "mean_shift_ci": [0.0, 1.0],
                            "rise_share": 0.5,
                            "rise_share_ci": [0.0, 1.0],
                            "fall_share": 0.0,
                            "mean_length_ratio": 2.1,
                            "description": "d",
                        }
                    },
                },
            }
        )
    )
    for suffix in (".jsonl", ".parquet"):
        graded = tmp_path / f"graded{suffix}"
        write_rows(graded, [graded_rows()])
        out = tmp_path / f"report{suffix}.html"
        assert main(["report", str(graded), "-o", str(out), "--probe", str(probe)]) == 0
        page = out.read_text()
        assert page.count('<svg class="plot"') == 3 and "| pad_2x" not in page and ">pad_2x</td>" in page
    assert main(["report", str(tmp_path / "graded.jsonl"), "-o", str(tmp_path / "r.txt")]) == 2
    assert "name a .html file" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "r.html")]) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "r.html").exists()
    (tmp_path / "bad.json").write_text("[1]")
    assert (
        main(
            [
                "report",
                str(tmp_path / "graded.jsonl"),
                "-o",
                str(tmp_path / "r.html"),
                "--probe",
                str(tmp_path / "bad.json"),
            ]
        )
        == 2
    )
    assert "not a prom-reward probe record" in capsys.readouterr().err


def test_cli_reports_compare_output_with_a_named_source_column(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    write_rows(path, [compared_rows()])
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out), "--source-col", "source", "--title", "Verdicts"]) == 0
    page = out.read_text()
    assert 'data-plot="verdict-distribution"' in page and 'data-plot="p-a-vs-length"' in page
    assert "<h2>By source (source)</h2>" in page and "Most confident for A" in page


def test_columns_can_be_renamed():
    rows = [{"prompt": "q", "completion": "abc", "score": 3.0, "feedback": "f", "policy": "x"}]
    s = summarize(rows, ReportColumns(instruction="prompt", response="completion", source="policy"))
    assert s["lengths"] == [3] and s["by_source"]["x"]["n"] == 1 and s["highest"][0]["instruction"] == "q"


@pytest.mark.parametrize(
    "rows",
    [
        [{"instruction": "q", "response": "r", "score": None, "feedback": None, "judge_failures": 2}] * 3,
        [{"instruction": "q", "response_a": "a", "response_b": "b", "winner": None, "p_a": None, "tie": True}] * 2,
        [{"instruction": "q", "response": "r" * n, "score": 3.0 + n / 100, "feedback": "f"} for n in range(1, 60)],
    ],
)
def test_degenerate_files_still_render(rows):
    """All failed, all ties, continuous scores: every plot is drawn with what there is, no crash, no NaN."""
    page = render_report(summarize(rows))
    assert page.count('<svg class="plot"') == 2 and re.search(r"\bnan\b", page, re.I) is None
    assert ("Every row has a verdict" in page) == all(r.get("score") or r.get("winner") or r.get("tie") for r in rows)


def test_continuous_scores_get_half_point_bins():
    rows = [{"instruction": "q", "response": "r", "score": s} for s in (1.0, 1.2, 4.6, 5.0, 5.0)]
    page = render_report(summarize(rows))
    assert ">1-1.5</text>" in page and ">4.5-5</text>" in page
    assert "<title>4.5-5: 3</title>" in page and "<title>1-1.5: 2</title>" in page


def _tie_and_a_rows() -> list[dict]:
    """A compare job's rows: one pair where both orders pick the longer response (A), one where each order picks
    the response in first position (the orders disagree: a tie)."""

    def respond(request, i):
        a, b = pair_of(request)
        if "tie" in a + b:
            return "The first one. [RESULT] A"
        return f"The longer one. [RESULT] {'A' if len(a) > len(b) else 'B'}"

    rows = [
        {"instruction": "Explain tides.", "response_a": "The moon pulls the sea, twice a day.", "response_b": "Moon."},
        {"instruction": "Pick one.", "response_a": "tie one", "response_b": "tie two"},
    ]
    judge = PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)
    return _job(compare_file, rows, judge, rubric="helpfulness", swap=True)


def _card(page: str, label: str) -> str:
    found = re.search(r'<div class="card"><b>([^<]*)</b><span>' + re.escape(label) + "</span></div>", page)
    assert found, f"no card {label!r}"
    return found.group(1)


def test_a_tie_is_a_decided_outcome_and_the_counts_add_up(tmp_path):
    rows = _tie_and_a_rows()
    assert [r["winner"] for r in rows] == ["A", None] and rows[1]["tie"] and rows[1]["judge_error"].startswith("tie:")
    s = summarize(rows)
    assert s["verdicts"] == {"A": 1, "B": 0, "tie": 0, "swap_disagreement": 1, "failed": 0}
    assert sum(s["verdicts"].values()) == s["n"] == 2
    assert s["failed"] == 0 and s["failures"] == []
    path, out = tmp_path / "verdicts.jsonl", tmp_path / "r.html"
    write_rows(path, [rows])
    assert main(["report", str(path), "-o", str(out)]) == 0
    page = out.read_text()
    assert _card(page, "without a verdict") == "0 (0.0%)" and _card(page, "ties (swap disagreement)") == "1"
    assert _card(page, "A wins") == "1" and _card(page, "B wins") == "0"
    assert "Every row has a verdict." in page and "tie: the two orders disagree" not in page
    assert "<title>no verdict: 0</title>" in page and "<title>swap_disagreement: 1</title>" in page


def test_most_confident_lists_hold_only_rows_that_favour_that_side():
    rows = [
        {"instruction": "q", "response_a": "a", "response_b": "b", "winner": w, "p_a": p, "tie": False}
        for w, p in (("A", 0.9), ("B", 0.35), ("B", 0.33), ("A", 0.6))
    ]
    s = summarize(rows)
    assert [m["value"] for m in s["highest"]] == [0.9, 0.6] and [m["value"] for m in s["lowest"]] == [0.33, 0.35]
    page = render_report(s)
    most_a = page[page.index("<h2>Most confident for A</h2>") : page.index("<h2>Most confident for B</h2>")]
    assert "0.35" not in most_a and "0.33" not in most_a and "0.90" in most_a


def test_forced_verdicts_are_counted_and_flagged():
    rows = [
        {"instruction": "q", "response": "r", "score": 4.0, "feedback": "f", "forced_verdicts": 1},
        {"instruction": "q", "response": "rr", "score": 2.0, "feedback": "f", "forced_verdicts": 0},
        {"instruction": "q", "response": "rrr", "score": 3.0, "feedback": "f", "forced_verdicts": 2},
    ]
    s = summarize(rows)
    assert s["forced"] == 2 and s["failed"] == 0
    page = render_report(s)
    assert _card(page, "forced verdicts") == "2 (66.7%)"
    assert "2 of 3 rows have a forced verdict" in page and page.count("<b>forced verdict</b>") == 4  # 2 rows, 2 lists
    clean = render_report(summarize([dict(r, forced_verdicts=0) for r in rows]))
    assert _card(clean, "forced verdicts") == "0 (0.0%)" and "have a forced verdict" not in clean


def test_a_folder_of_parts_is_read_like_a_file_and_the_job_rubric_fills_the_rows(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "rubric"} for r in ROLLOUTS]
    src = tmp_path / "in.jsonl"
    write_rows(src, [rows])
    for out in (tmp_path / "graded_parts", tmp_path / "graded.jsonl"):  # parts only; merged, parts beside it
        grade_file(str(src), str(out), judge_by_response(TABLE), progress=False, rubric="helpfulness", batch_size=2)
    merged, page_of = tmp_path / "graded.jsonl", {}
    for given in (tmp_path / "graded_parts", merged, tmp_path / "graded.jsonl.parts"):
        report = tmp_path / f"{given.name}.html"
        assert main(["report", str(given), "-o", str(report)]) == 0
        page_of[given.name] = page = report.read_text()
        assert _card(page, "rows") == "5" and "rubric: helpfulness" in page and "(none)" not in page
        assert [m["index"] for m in summarize(read_rows(given))["highest"]] == [1, 4, 0, 3]  # source_index order
    assert main(["report", str(tmp_path / "nothing_here"), "-o", str(tmp_path / "x.html")]) == 2


XSS = "<script>alert(1)</script>"


def complete_probe(text: str = "x") -> dict:
    """A probe record as ``prom-reward probe`` writes it, ``text`` in every string it holds."""
    return {
        "judge": text,
        "date": text,
        "seconds": 3.0,
        "judge_stats": {"samples": 4, "forced": 2},
        "llmbar": {
            "sets": {
                text: {
                    "n": 3,
                    "accuracy": 0.5,
                    "accuracy_ci": [0.4, 0.6],
                    "order_accuracy": [0.5, 0.5],
                    "both_right": 0.5,
                    "agreement": 0.5,
                    "failed": 1,
                }
            },
            "gaps": {text: 0.1},
        },
        "shifts": {
            "score": text,
            "n_items": text,
            "baseline_samples": text,
            "original_mean": 3.0,
            "original_failed": 0,
            "edits": {
                text: {
                    "n": 3,
                    "failed": 1,
                    "mean_shift": 0.5,
                    "mean_shift_ci": [0.0, 1.0],
                    "rise_share": 0.5,
                    "rise_share_ci": [0.0, 1.0],
                    "fall_share": 0.0,
                    "mean_length_ratio": 2.1,
                    "description": text,
                }
            },
        },
    }


def test_every_string_of_a_probe_record_is_escaped(tmp_path):
    """A probe record is a file the user gives: markup in any of its strings (the item count and the baseline
    samples were written into the page as they were) is shown as text."""
    graded, probe, out = tmp_path / "g.jsonl", tmp_path / "probe.json", tmp_path / "r.html"
    write_rows(graded, [graded_rows()])
    probe.write_text(json.dumps(complete_probe(XSS)))
    assert main(["report", str(graded), "-o", str(out), "--probe", str(probe)]) == 0
    page = out.read_text()
    assert "<script" not in page and "Hacking probe" in page and page.count("&lt;script&gt;") >= 5


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        (lambda p: p.update(seconds="3 s"), "ValueError"),
        (lambda p: p.update(llmbar=[1]), "TypeError"),
        (lambda p: p["shifts"].pop("edits"), "KeyError: 'edits'"),
        (lambda p: p["llmbar"]["sets"]["x"].pop("failed"), "KeyError: 'failed'"),
        (lambda p: p["llmbar"].update(sets={"x": 5}), "TypeError"),
    ],
)
def test_an_incomplete_probe_record_is_refused_before_anything_is_written(tmp_path, capsys, change, cause):
    graded, probe, out = tmp_path / "g.jsonl", tmp_path / "probe.json", tmp_path / "r.html"
    write_rows(graded, [graded_rows()])
    record = complete_probe()
    change(record)
    probe.write_text(json.dumps(record))
    assert main(["report", str(graded), "-o", str(out), "--probe", str(probe)]) == 2
    err = capsys.readouterr().err
    assert f"--probe {probe}: not a complete prom-reward probe record ({cause}" in err and "Traceback" not in err
    assert "fix: give the .json that prom-reward probe wrote" in err and not out.exists()


def test_texts_that_are_not_strings_or_hold_lone_surrogates_are_shown(tmp_path, capsys):
    """Feedback or a rubric that is an object (another tool's file) is shown as its JSON (was an AttributeError);
    a lone surrogate (a ``\\ud800`` JSON escape) is written as "?" (was a UnicodeEncodeError); an empty file is an
    error naming it."""
    graded, out = tmp_path / "g.jsonl", tmp_path / "r.html"
    graded.write_bytes(
        b'{"instruction": "q\\ud800", "response": "r", "score": 3, "feedback": {"a": "<b>"}, "rubric": ["<i>"]}\n'
    )
    assert main(["report", str(graded), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "{&quot;a&quot;: &quot;&lt;b&gt;&quot;}" in page and "q?" in page and '"<b>"' not in page
    graded.write_bytes(b"")
    assert main(["report", str(graded), "-o", str(out)]) == 2
    assert f"prom-reward: error: {graded}: no rows to report on" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"p_a": 5}, r"row 0: 'p_a' 5 is not a probability \(0 to 1\)"),
        ({"p_a": -0.1}, r"row 0: 'p_a' -0.1 is not a probability"),
        ({"winner": "C"}, r"row 0: 'winner' 'C' is not 'A', 'B' or null"),
        ({"winner": {"x": 1}}, r"row 0: 'winner' \{'x': 1\} is not 'A', 'B' or null"),
    ],
)
def test_a_compare_row_with_a_verdict_prom_reward_never_writes_is_refused(tmp_path, capsys, change, match):
    """A p_a outside 0..1 or a winner other than A, B or null (an edited or foreign file) is an error naming the
    file, the row and the column, as an off-scale grade is; it was drawn and counted as it was."""
    row = {"instruction": "q", "response_a": "a", "response_b": "b", "winner": "A", "p_a": 0.7, **change}
    with pytest.raises(InputError, match=match):
        summarize([row])
    path, out = tmp_path / "verdicts.jsonl", tmp_path / "r.html"
    write_rows(path, [[row]])
    assert main(["report", str(path), "-o", str(out)]) == 2 and not out.exists()
    assert re.search(rf"prom-reward: error: {re.escape(str(path))}: {match}.*fix:", capsys.readouterr().err)


def test_an_output_that_is_a_folder_is_refused_before_reading(tmp_path, capsys):
    """``-o`` naming a folder is exit 2 up front (it failed only when the page was written, leaving
    ``report.html.tmp`` behind)."""
    graded, out = tmp_path / "g.jsonl", tmp_path / "report.html"
    write_rows(graded, [graded_rows()])
    out.mkdir()
    assert main(["report", str(graded), "-o", str(out)]) == 2
    assert "that is a folder; fix: name a .html file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.jsonl", "report.html"]


@pytest.mark.parametrize(
    "row",
    [
        {"instruction": "q", "response": "r", "score": 10**400},
        {"instruction": "q", "response_a": "a", "response_b": "b", "winner": "A", "p_a": 10**400},
    ],
)
def test_an_integer_too_large_for_a_float_is_refused_not_a_traceback(tmp_path, capsys, row):
    path, out = tmp_path / "g.jsonl", tmp_path / "r.html"
    write_rows(path, [[row]])
    assert main(["report", str(path), "-o", str(out)]) == 2 and not out.exists()
    assert "row 0: " in capsys.readouterr().err
