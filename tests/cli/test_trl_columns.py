"""``prom-reward grade``, ``compare`` and ``pairs`` on TRL-shaped files with no column flag, through the real
entry point against a stand-in judge on 127.0.0.1 (issue 35, item 2): TRL's ``prompt`` / ``completion`` and
``prompt`` / ``chosen`` / ``rejected``, strings or message lists, in JSON lines, Parquet or a ``save_to_disk``
folder; a flag still wins. The refusals (both names of one role, a DatasetDict folder) are cases of
``tests/cli/test_errors.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prom_reward.cli.main import build_parser, main
from prom_reward.jobs.source import read_rows
from tests.jobs.helpers import cli, judge_server

USER = [{"role": "user", "content": "2+2?"}]


def _say(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _write(tmp_path: Path, how: str, rows: list[dict]) -> str:
    if how == "jsonl":
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(tmp_path / "in.jsonl")
    import datasets  # in the [train] extra, installed by `make setup`

    ds = datasets.Dataset.from_list(rows)
    if how == "parquet":
        ds.to_parquet(str(tmp_path / "in.parquet"))
        return str(tmp_path / "in.parquet")
    ds.save_to_disk(str(tmp_path / "saved"))
    return str(tmp_path / "saved")


# (name, command, input layout, rows, extra flags, output column, expected values of it)
CASES = [
    (
        "grade: TRL conversational",
        "grade",
        "jsonl",
        [{"prompt": USER, "completion": _say("good 4")}, {"prompt": USER, "completion": _say("bad 5")}],
        [],
        "score",
        [5.0, 1.0],
    ),
    (
        "grade: TRL standard, save_to_disk",
        "grade",
        "saved",
        [{"prompt": "2+2?", "completion": "bad 5"}, {"prompt": "3+3?", "completion": "good 6"}],
        [],
        "score",
        [1.0, 5.0],
    ),
    (
        "grade: our names still",
        "grade",
        "jsonl",
        [{"instruction": "2+2?", "response": "good 4"}],
        [],
        "score",
        [5.0],
    ),
    (
        "grade: the flags win over both names",
        "grade",
        "jsonl",
        [{"instruction": "x", "prompt": "2+2?", "response": "bad", "completion": "good 4"}],
        ["--instruction-col", "prompt", "--response-col", "completion"],
        "score",
        [5.0],
    ),
    (
        "compare: TRL preference data, Parquet",
        "compare",
        "parquet",
        [
            {"prompt": USER, "chosen": _say("good 4"), "rejected": _say("bad 5")},
            {"prompt": USER, "chosen": _say("bad 3"), "rejected": _say("good 4")},
        ],
        [],
        "winner",
        ["A", "B"],
    ),
    (
        "pairs: TRL prompt/completion rows, --layout long",
        "pairs",
        "jsonl",
        [{"prompt": USER, "completion": _say(c)} for c in ("meh 1", "good 2", "bad 3")],
        ["--layout", "long"],
        "chosen",
        [_say("good 2")],
    ),
]


@pytest.mark.parametrize(
    ("command", "how", "rows", "extra", "column", "values"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_trl_shaped_file_runs_with_no_column_flag(tmp_path, capsys, command, how, rows, extra, column, values):
    src, out = _write(tmp_path, how, rows), tmp_path / "out.jsonl"
    server = judge_server()
    try:
        code = main(
            [command, src, "-o", str(out), "--server", server.url, "--rubric", "helpfulness", "--quiet", *extra]
        )
        sent = [b["messages"][-1]["content"] for b in server.bodies("/v1/chat/completions")]
    finally:
        server.stop()
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["failed"] == 0
    assert [r[column] for r in read_rows(out)] == values
    assert sent and not any("'role'" in text or '"role"' in text for text in sent)  # message lists made text


def test_the_console_script_grades_a_trl_file(tmp_path):
    src = _write(tmp_path, "jsonl", [{"prompt": USER, "completion": _say("good 4")}])
    server = judge_server()
    try:
        args = ["grade", src, "-o", str(tmp_path / "o.jsonl"), "--server", server.url, "--rubric", "helpfulness"]
        done = cli([*args, "--quiet"], env={"PROM_REWARD_NO_ENGINE": "1", "HF_HUB_OFFLINE": "1"})
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 1
    assert [r["score"] for r in read_rows(tmp_path / "o.jsonl")] == [5.0]


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            "grade",
            ["--instruction-col", "default instruction, else TRL's prompt", "--response-col", "TRL's completion"],
        ),
        ("compare", ["--response-a-col", "TRL's chosen", "--response-b-col", "TRL's rejected"]),
        ("pairs", ["--prompt-col", "default prompt)", "--completion-col", "default completion)"]),
    ],
)
def test_the_help_says_the_default_columns(command, said):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    text = " ".join(sub.format_help().split())
    for words in said:
        assert words in text, (words, text)
