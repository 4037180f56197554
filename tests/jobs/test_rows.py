"""What each job kind writes per row (``prom_reward.jobs.kinds``/``pairs``) through the Python
entry points (``prom_reward.jobs.run``) with a scripted judge: columns and types (the same in JSON lines
and Parquet), swap, ties, failures, per-row rubrics and references, and row errors that name the row's
place in the input, the column and the option."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import InputError
from prom_reward.jobs.run import compare_file, grade_file, pairs_file
from prom_reward.jobs.source import read_rows


def _section(user: str, name: str) -> str:
    return user.split(f"###{name}:\n")[1].split("\n\n###")[0]


def _respond(request, i):
    """good beats bad; "either" vs "either": always the first position (position bias); "mute": no verdict."""
    if "###Response to evaluate:" in request.user:
        r = _section(request.user, "Response to evaluate")
        if r == "mute":
            return "I would rather not say."
        return "Graded. [RESULT] " + ("5" if r.startswith("good") else "2")
    a, b = _section(request.user, "Response A"), _section(request.user, "Response B")
    if "mute" in (a, b):
        return "I would rather not say."
    if a.startswith("either") and b.startswith("either"):
        return "The first one. [RESULT] A"
    return "Compared. [RESULT] " + ("A" if a.startswith("good") else "B")


@pytest.fixture
def seen():
    return []


@pytest.fixture
def judge(seen):
    def respond(request, i):
        seen.append(request.user)
        return _respond(request, i)

    return {"backend": ScriptedBackend(respond=respond), "max_retries": 0}


ROWS = [
    {"id": 0, "instruction": "Q0?", "response_a": "good 0", "response_b": "bad 0", "rubric": "helpfulness"},
    {
        "id": 1,
        "instruction": "Q1?",
        "response_a": "bad 1",
        "response_b": "good 1",
        "rubric": "harmlessness",
        "reference_answer": "R1",
    },
    {"id": 2, "instruction": "Q2?", "response_a": "either x", "response_b": "either y", "rubric": "helpfulness"},
    {"id": 3, "instruction": "Q3?", "response_a": "mute", "response_b": "good 3", "rubric": "helpfulness"},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_compare_swap_ties_and_failures(tmp_path, judge, seen):
    src, out = _write(tmp_path / "in.jsonl", ROWS), tmp_path / "out.jsonl"
    s = compare_file(src, out, judge, progress=False)
    got = list(read_rows(out))
    assert [r["source_index"] for r in got] == [0, 1, 2, 3] and len(seen) == 8  # both orders of every row
    assert all(r[k] == ROWS[i][k] for i, r in enumerate(got) for k in ROWS[i])  # the input columns stay
    assert [(r["winner"], r["tie"], r["swap_agreement"]) for r in got] == [
        ("A", False, True),
        ("B", False, True),
        (None, True, False),
        (None, False, None),
    ]
    assert [r["p_a"] for r in got[:3]] == [1.0, 0.0, 0.5] and got[3]["p_a"] is None
    assert [r["judge_error"] for r in got] == [
        None,
        None,
        "tie: the two orders disagree",
        "no verdict in 2 sample(s) (last: prometheus2: no '[RESULT] A or B' verdict at the end of the feedback)",
    ]
    assert [r["judge_failures"] for r in got] == [0, 0, 0, 2] and got[0]["feedback"] == "Compared."
    assert (s.rows, s.judged, s.skipped, s.failed) == (4, 2, {"swap_disagreement": 1}, 1)
    # the row's rubric and reference answer went into its prompts (the swapped order: A and B exchanged)
    assert "###Reference Answer:\nR1" in seen[1] and "avoid harmful" in seen[1]
    assert _section(seen[4], "Response A") == "bad 0" and _section(seen[4], "Response B") == "good 0"
    # one order only: position bias decides row 2, and there is no swap agreement
    seen.clear()
    compare_file(src, out, judge, swap=False, overwrite=True, progress=False)
    got = list(read_rows(out))
    assert len(seen) == 4 and [r["winner"] for r in got] == ["A", "B", "A", None]
    assert all(r["swap_agreement"] is None for r in got) and got[3]["judge_error"].startswith("no verdict in 1 ")


@pytest.mark.parametrize("job", ["grade", "compare"])
def test_the_same_columns_and_types_in_jsonl_and_parquet(job, tmp_path, judge):
    """Grade: every result column in every row, P(1..5) with all five keys; a null first batch (no verdict)
    still gets the result types; the JSON-lines and Parquet outputs hold the same rows."""
    run = grade_file if job == "grade" else compare_file
    rows = (
        [{"instruction": "Q?", "response": "mute", "tag": None}, {"instruction": "Q?", "response": "good", "tag": "x"}]
        if job == "grade"
        else [ROWS[3], ROWS[0]]
    )
    src = _write(tmp_path / "in.jsonl", rows)
    opts = dict(rubric="helpfulness", batch_size=1, progress=False)
    run(src, tmp_path / "out.jsonl", judge, **opts)
    run(src, tmp_path / "out.parquet", judge, **opts)
    a, b = list(read_rows(tmp_path / "out.jsonl")), list(read_rows(tmp_path / "out.parquet"))
    assert a == b
    schema = pq.read_schema(tmp_path / "out.parquet")
    if job == "grade":
        assert [r["score"] for r in a] == [None, 5.0] and a[0]["judge_error"].startswith("no verdict")
        assert str(schema.field("score").type) == "double" and str(schema.field("tag").type) == "string"
        assert set(a[1]) == {
            "source_index",
            "instruction",
            "response",
            "tag",
            "score",
            "feedback",
            "expected_score",
            "probabilities",
            "judge_failures",
            "judge_retries",
            "forced_verdicts",
            "judge_error",
            "checklist_score",
            "checklist_verdicts",
        }
    else:
        assert [r["swap_agreement"] for r in a] == [None, True] and str(schema.field("swap_agreement").type) == "bool"


@pytest.mark.parametrize("batch_size", [1, 4])
def test_a_column_only_some_rows_have_is_kept_in_parquet(tmp_path, judge, batch_size):
    """The Parquet schema is settled over every row, not the first of a block: a column absent from row 0
    is written (null where a row lacks it), as in JSON lines; one holding two kinds is refused, named."""
    rows = [{"instruction": "Q?", "response": "good"}, {"instruction": "Q?", "response": "good", "note": "x"}]
    src = _write(tmp_path / "in.jsonl", rows)
    opts = dict(rubric="helpfulness", batch_size=batch_size, progress=False)
    grade_file(src, tmp_path / "out.jsonl", judge, **opts)
    grade_file(src, tmp_path / "out.parquet", judge, **opts)
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["note"] for r in got] == [None, "x"]

    def kept(rs):
        return [{k: v for k, v in r.items() if v is not None} for r in rs]

    assert kept(got) == kept(read_rows(tmp_path / "out.jsonl")) and "note" in kept(got)[1]
    _write(src, [*rows, {"instruction": "Q?", "response": "good", "note": 3}])
    with pytest.raises(InputError, match=r"in.jsonl:1 .. .*in.jsonl:3: column 'note' holds values of two kinds"):
        grade_file(src, tmp_path / "other.parquet", judge, **opts)
    _write(src, [*rows, {"instruction": "Q?", "response": "good", "big": 2**70}])  # beyond int64: was a traceback
    with pytest.raises(InputError, match=r"column 'big' holds an integer a Parquet column cannot hold"):
        grade_file(src, tmp_path / "other.parquet", judge, **opts)
    assert not (tmp_path / "other.parquet").exists()


def test_parquet_input_types_json_has_none_for_are_written_as_text(tmp_path, judge):
    """Dates, times, durations, decimals and bytes of a Parquet input reach a JSON-lines output (they stopped the
    job with a traceback after judging), and stay as they were in a Parquet output."""
    import datetime
    import decimal

    import pyarrow as pa

    values = {
        "when": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "day": datetime.date(2024, 1, 2),
        "at": datetime.time(3, 4),
        "took": datetime.timedelta(seconds=90),
        "price": decimal.Decimal("1.50"),
        "raw": b"\x00\xff",
    }
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"instruction": "Q?", "response": "good", **values}]), src)
    grade_file(src, tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert {k: row[k] for k in values} == {
        "when": "2024-01-02T03:04:05+00:00",
        "day": "2024-01-02",
        "at": "03:04:00",
        "took": 90.0,
        "price": "1.50",
        "raw": "AP8=",
    }
    assert row["score"] == 5.0
    grade_file(src, tmp_path / "out.parquet", judge, rubric="helpfulness", progress=False)
    (row,) = read_rows(tmp_path / "out.parquet")
    assert {k: row[k] for k in values} == values


def test_a_lone_surrogate_in_a_column_not_judged(tmp_path, judge):
    """Kept as the input's escape in JSON lines (it stopped the job with a traceback after judging); a Parquet
    output, which cannot hold it, is refused before judging, naming the row and the column."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"instruction": "Q?", "response": "good", "note": "ok"}\n'
        '{"instruction": "Q?", "response": "good", "note": "a\\ud800"}\n'
    )
    grade_file(src, tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    assert [r["note"] for r in read_rows(tmp_path / "out.jsonl")] == ["ok", "a\ud800"]
    assert '"note": "a\\ud800"' in (tmp_path / "out.jsonl").read_text()
    with pytest.raises(InputError, match=r"in.jsonl:2: row 1: column 'note' holds a lone surrogate .*\.jsonl output"):
        grade_file(src, tmp_path / "out.parquet", judge, rubric="helpfulness", progress=False)
    assert not (tmp_path / "out.parquet").exists()


def test_a_folder_input_skips_names_starting_with_underscore_or_dot(tmp_path, judge):
    """As pyarrow.dataset does: a part folder's failure markers and temporaries, a copy's ``._`` files."""
    from prom_reward.jobs.parts import write_part

    rows = [{"source_index": i, "instruction": f"Q{i}?", "response": "good"} for i in range(4)]
    write_part(tmp_path / "parts", 0, 2, rows[:2], "jsonl", failed="backend failed: down")
    write_part(tmp_path / "parts", 2, 4, rows[2:], "jsonl")
    (tmp_path / "parts" / "_tmp-1-part-000000000004-000000000006.jsonl").write_text('{"cut')
    (tmp_path / "parts" / "._part-000000000000-000000000002.jsonl").write_bytes(b"\x00\x05\x16\x07Mac OS X")
    assert [r["instruction"] for r in read_rows(tmp_path / "parts")] == ["Q0?", "Q1?", "Q2?", "Q3?"]


@pytest.mark.parametrize("name", ["in.jsonl", "in.json"])
def test_a_utf8_byte_order_mark_is_not_part_of_the_first_row(tmp_path, judge, name):
    rows = [{"instruction": "Q?", "response": "good"}, {"instruction": "Q?", "response": "bad"}]
    text = json.dumps(rows) if name == "in.json" else "".join(json.dumps(r) + "\r\n" for r in rows)
    src = tmp_path / name
    src.write_bytes(b"\xef\xbb\xbf" + text.encode())
    grade_file(src, tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    assert [(r["instruction"], r["score"]) for r in read_rows(tmp_path / "out.jsonl")] == [("Q?", 5.0), ("Q?", 2.0)]


def test_a_bad_message_list_is_named_once(tmp_path, judge):
    src = _write(tmp_path / "in.jsonl", [{"instruction": ["a"], "response": "good"}])
    with pytest.raises(InputError) as e:
        grade_file(src, tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    assert str(e.value).count("in.jsonl:1: row 0") == 1 and str(e.value).count("instruction_column") == 1, e.value
    assert e.value.said({"instruction_column": "--instruction-col"}).count("--instruction-col") == 1
    assert "column 'instruction': prompt messages must be dicts" in str(e.value)


@pytest.mark.parametrize("expected", [True, False])
def test_grade_expected_score_has_all_five_probabilities_when_asked_for(tmp_path, expected):
    from prom_reward.backends.base import Completion, GenerationResult, TokenLogprobs

    class Logprobs(ScriptedBackend):
        def generate(self, requests):
            tokens = (TokenLogprobs(" ", -0.1, {}), TokenLogprobs("4", -0.2, {"4": -0.2, "5": -1.8}))
            return [GenerationResult((Completion("Fine. [RESULT] 4", logprobs=tokens),)) for _ in requests]

    src = _write(tmp_path / "in.jsonl", [{"instruction": "Q?", "response": "A"}])
    grade_file(
        src,
        tmp_path / "o.parquet",
        {"backend": Logprobs(outputs=[]), "expected_score": expected},
        rubric="helpfulness",
        progress=False,
    )
    (row,) = read_rows(tmp_path / "o.parquet")
    if not expected:  # the backend sent logprobs anyway (as for a forced verdict): the columns follow the option
        assert row["expected_score"] is None and row["probabilities"] is None and row["score"] == 4.0
        return
    assert set(row["probabilities"]) == {"1", "2", "3", "4", "5"} and row["probabilities"]["1"] == 0.0
    assert row["expected_score"] is not None


def test_row_errors_name_the_place_in_the_input_the_column_and_the_option(tmp_path, judge, seen):
    rows = [{"instruction": "Q?", "response_a": "good", "answer_b": "bad"}] * 40
    rows[33] = {"instruction": "Q?", "response_a": "good"}
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=r"in.jsonl:1: row 0: column 'response_b' missing .*with response_b_column$"):
        compare_file(src, out, judge, rubric="helpfulness", progress=False)
    # row numbers count from the start of the input, not of the batch; found before any judging
    with pytest.raises(InputError, match=r"in.jsonl:34: row 33: column 'answer_b' missing"):
        compare_file(src, out, judge, rubric="helpfulness", response_b_column="answer_b", batch_size=16, progress=False)
    assert seen == [] and not out.exists()
    ok = [
        {"instruction": "Q?", "response_a": "good", "response_b": "bad", "rubric": "helpfulness"},
        {"instruction": "Q?", "response_a": "good", "response_b": "bad"},
    ]
    with pytest.raises(InputError, match=r"in.jsonl:2: row 1: no rubric: .*pass rubric NAME\|FILE.* rubric_column$"):
        compare_file(_write(src, ok), out, judge, progress=False)
    with pytest.raises(
        InputError, match=r"row 1: column 'instruction': .*must be a str, got int.*with instruction_column$"
    ):
        grade_file(
            _write(src, [{"instruction": "Q", "response": "A"}, {"instruction": 3, "response": "A"}]),
            out,
            judge,
            rubric="helpfulness",
            progress=False,
        )
    # a row's own rubric that does not fit the judge's format fails that row alone (the format's problem)
    grade_file(
        _write(
            src,
            [
                {"instruction": "Q", "response": "A", "rubric": "helpfulness"},
                {"instruction": "Q", "response": "A", "rubric": {"criteria": "Kind?"}},
            ],
        ),
        out,
        judge,
        progress=False,
    )
    got = list(read_rows(out))
    assert got[0]["judge_error"] is None and got[1]["score"] is None
    assert got[1]["judge_error"].startswith("rubric: rubric 'Kind?' has no score descriptions; prometheus2 grades")


def test_pairs_rows_skips_and_long_layout(tmp_path, judge):
    rows = [{"id": i, "prompt": f"Q{i}?", "completions": [f"meh {i}", f"good {i}", "mute"]} for i in range(3)]
    rows[0]["completions"] = ["meh 0", "good 0", "bad 0"]
    rows[1]["completions"] = ["good", "good too"]  # all equal: a tie break, then still tied
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "pairs.jsonl"
    s = pairs_file(src, out, judge, rubric="helpfulness", keep_columns=("id",), max_tie_rounds=1, progress=False)
    got, skipped = list(read_rows(out)), list(read_rows(tmp_path / "pairs.skipped.jsonl"))
    assert [(p["source_index"], p["id"], p["chosen"], p["margin"]) for p in got] == [(0, 0, "good 0", 3.0)]
    assert [(sk["source_index"], sk["reason"]) for sk in skipped] == [(1, "tie"), (2, "judge_failed")]
    assert s.skipped == {"tie": 1} and s.failed == 1
    assert all(set(sk) == {"source_index", "reason", "pair", "judge_error"} for sk in skipped)
    long = [
        {"prompt": "P", "completion": "good a"},
        {"prompt": "P", "completion": "bad b"},
        {"prompt": "R", "completion": "bad c"},
        {"prompt": "R", "completion": "good d"},
    ]
    s = pairs_file(
        _write(tmp_path / "long.jsonl", long),
        tmp_path / "long_pairs.jsonl",
        judge,
        rubric="helpfulness",
        layout="long",
        batch_size=1,
        progress=False,
    )
    got = list(read_rows(tmp_path / "long_pairs.jsonl"))
    assert [(p["source_index"], p["chosen"], p["rejected"]) for p in got] == [
        (0, "good a", "bad b"),
        (2, "good d", "bad c"),  # source_index: the group's first input row
    ]
    assert s.rows == 4 and s.pairs == 2  # input rows


@pytest.mark.parametrize("job", ["grade", "compare"])
def test_a_row_too_long_for_the_judge_fails_alone_in_one_judge_call(job, tmp_path):
    calls = []

    class Counting(ScriptedBackend):
        def generate(self, requests):
            calls.append(len(requests))
            return super().generate(requests)

    long = "good " + "word " * 2000
    if job == "grade":
        rows = [{"instruction": "Q?", "response": r} for r in ("good", long, "bad")]
        run, want, key = grade_file, [5.0, None, 2.0], "score"
    else:
        rows = [{"instruction": "Q?", "response_a": a, "response_b": "bad"} for a in ("good", long, "good 2")]
        run, want, key = compare_file, ["A", None, "A"], "winner"
    judge = {"backend": Counting(respond=_respond, context=1024), "max_retries": 0, "sampling": {"max_tokens": 64}}
    run(_write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl", judge, rubric="helpfulness", progress=False)
    got = list(read_rows(tmp_path / "out.jsonl"))
    assert [r[key] for r in got] == want and len(calls) == 1  # no row-at-a-time re-run
    assert got[1]["judge_error"].startswith("too long for the judge: the judge prompt is")
    assert [r["judge_error"] is None for r in got] == [True, False, True]
