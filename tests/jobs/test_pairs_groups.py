"""``pairs``: a group (a wide row, or consecutive long-layout rows with one prompt) with fewer than two
completions makes no pair: it is skipped with its reason and counted like the other skips, and the job
goes on; in the long layout, messages name the group by its first line, never by a row number."""

from __future__ import annotations

import json

from prom_reward.cli.main import main
from tests.jobs.helpers import judge_server, write


def _pairs(tmp_path, src, *extra: str) -> tuple[int, str]:
    out = tmp_path / "pairs.jsonl"
    server = judge_server()
    try:
        argv = ["pairs", str(src), "-o", str(out), "--server", server.url, "--model", "judge", "--rubric",
                "helpfulness", "--strategy", "all_pairs", "--quiet", *extra]  # fmt: skip
        return main(argv), str(out)
    finally:
        server.stop()


def test_a_long_layout_group_of_one_completion_is_skipped_and_counted(tmp_path, capsys):
    lines = [
        {"prompt": "P0", "completion": "good a"},
        {"prompt": "P0", "completion": "bad b"},
        {"prompt": "P1", "completion": "good alone"},  # line 3: a group of one
        {"prompt": "P2", "completion": "bad c"},
        {"prompt": "P2", "completion": "good d"},
    ]
    code, out = _pairs(tmp_path, write(tmp_path / "in.jsonl", lines), "--layout", "long")
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 2 and summary["skipped"] == {"too_few_completions": 1} and summary["rows"] == 5
    pairs = [json.loads(line) for line in open(out)]
    assert [(p["source_index"], p["chosen"]) for p in pairs] == [
        (0, "good a"),
        (3, "good d"),
    ]  # the input line of the group
    (skip,) = [json.loads(line) for line in open(out.replace(".jsonl", ".skipped.jsonl"))]
    assert skip["source_index"] == 2 and skip["reason"] == "too_few_completions" and skip["pair"] is None
    assert skip["judge_error"] == "1 completion(s): a preference pair needs at least 2"


def test_a_wide_row_of_one_completion_is_skipped_too(tmp_path, capsys):
    rows = [{"prompt": "P0", "completions": ["good a", "bad b"]}, {"prompt": "P1", "completions": ["good"]}]
    code, _ = _pairs(tmp_path, write(tmp_path / "in.jsonl", rows))
    assert code == 0 and json.loads(capsys.readouterr().out)["skipped"] == {"too_few_completions": 1}


def test_a_bad_long_layout_group_is_named_by_its_first_line(tmp_path, capsys):
    lines = [
        {"prompt": "P0", "completion": "good a"},
        {"prompt": "P0", "completion": "bad b"},
        {"prompt": "P1", "completion": 7},  # line 3: not text
        {"prompt": "P1", "completion": "good c"},
    ]
    code, out = _pairs(tmp_path, write(tmp_path / "in.jsonl", lines), "--layout", "long")
    err = capsys.readouterr().err
    assert code == 2 and "in.jsonl:3: the group of rows from this line with the same 'prompt': " in err, err
    assert "row 1" not in err and "completions[0] must be a str" in err
