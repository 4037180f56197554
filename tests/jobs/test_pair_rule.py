"""A pair decided by one order only, through the real CLI (``prom-reward compare`` and ``pairs --strategy
all_pairs``) against a judge server on 127.0.0.1 that writes no verdict when response A starts with "mute":
no winner with the reason, and no DPO pair (a skip counted with the reason)."""

from __future__ import annotations

import json

import pytest

from prom_reward.cli.main import main
from prom_reward.jobs.source import read_rows
from tests.fakes import FakeServer
from tests.jobs.helpers import _section, argv, write

# the first sample and its 2 re-samples, and the format's reason for the last
NO_VERDICT = "no verdict in 3 sample(s) (last: prometheus2: no '[RESULT] A or B' verdict at the end of the feedback)"


def _reply(k: int, body: dict) -> tuple[int, dict]:
    user = body["messages"][-1]["content"]
    a, b = _section(user, "Response A"), _section(user, "Response B")
    rank = {"good": 2, "mute": 1, "bad": 0}
    text = (
        "I cannot tell."
        if a.startswith("mute")
        else "Compared. [RESULT] " + ("A" if rank[a.split()[0]] > rank[b.split()[0]] else "B")
    )
    return 200, {
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            for i in range(body.get("n") or 1)
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }


@pytest.fixture
def server():
    s = FakeServer(
        {
            "/v1/chat/completions": _reply,
            "/v1/models": lambda k, b: (200, {"data": [{"id": "judge", "max_model_len": 32768}]}),
        }
    )
    yield s
    s.stop()


def _summary(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_compare_gives_no_winner_from_one_order(tmp_path, server, capsys):
    pairs = [("good 0", "mute 0"), ("mute 1", "good 1"), ("good 2", "bad 2")]
    rows = [{"instruction": f"Q{i}?", "response_a": a, "response_b": b} for i, (a, b) in enumerate(pairs)]
    src = write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(argv("compare", src, out, server.url)) == 0
    got = [(r["winner"], r["tie"], r["swap_agreement"], r["p_a"], r["judge_error"]) for r in read_rows(out)]
    assert got == [
        (None, False, None, None, f"order B-A failed: {NO_VERDICT}"),  # A-B alone said A
        (None, False, None, None, f"order A-B failed: {NO_VERDICT}"),  # B-A alone said B
        ("A", False, True, 1.0, None),
    ]
    s = _summary(capsys)
    assert (s["rows"], s["judged"], s["failed"], s["skipped"]) == (3, 1, 2, {})
    # --no-swap asks for one order: its verdict is the verdict
    assert main(argv("compare", src, tmp_path / "one.jsonl", server.url, "--no-swap")) == 0
    assert [r["winner"] for r in read_rows(tmp_path / "one.jsonl")] == ["A", None, "A"]


def test_pairs_all_pairs_makes_no_pair_from_one_order(tmp_path, server, capsys):
    rows = [
        {"id": 0, "prompt": "Q0?", "completions": ["good 0", "mute 0"]},  # B-A fails: no pair
        {"id": 1, "prompt": "Q1?", "completions": ["good 1", "bad 1"]},  # both orders agree: a pair
    ]
    src, out = write(tmp_path / "in.jsonl", rows), tmp_path / "pairs.jsonl"
    assert main(argv("pairs", src, out, server.url, "--strategy", "all_pairs")) == 0
    got = list(read_rows(out))
    assert [(p["id"], p["chosen"], p["rejected"], p["swap_agreement"]) for p in got] == [(1, "good 1", "bad 1", True)]
    skipped = list(read_rows(tmp_path / "pairs.skipped.jsonl"))
    assert skipped == [
        {"source_index": 0, "reason": "judge_failed", "pair": [0, 1], "judge_error": f"order B-A failed: {NO_VERDICT}"}
    ]
    s = _summary(capsys)
    assert (s["pairs"], s["skipped"], s["failed"]) == (1, {}, 1)
