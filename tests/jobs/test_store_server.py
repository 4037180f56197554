"""A ``--store`` in front of a judge server given no ``--model``: the store keys each judgment by the model the
server serves (asked once, ``GET /models``) and by the format, so a re-run against a server now serving another
model judges every row again, and one against the same model is answered by the store (issue 44)."""

from __future__ import annotations

import json

import pytest

from prom_reward.cli.main import main
from tests.fakes import StandInJudge
from tests.jobs.helpers import rows, write


def _grade(tmp_path, out: str, model: str, *more: str) -> tuple[dict, StandInJudge]:
    judge = StandInJudge(model=model).start()
    src = write(tmp_path / "in.jsonl", rows("grade", 3))
    try:
        args = ["grade", str(src), "-o", str(tmp_path / out), "--server", judge.url, "--rubric", "helpfulness"]
        assert main([*args, "--store", str(tmp_path / "st.sqlite"), "--quiet", *more]) == 0
    finally:
        judge.stop()
    return json.loads(open(tmp_path / out).readline()), judge


@pytest.mark.parametrize(
    "second, more, stored",
    [
        ("stand-in-judge", [], True),  # the same model: the store answers
        ("another-judge", [], False),  # another model behind the same flags: judged again
        ("stand-in-judge", ["--format", "m-prometheus"], False),  # another format: judged again
    ],
    ids=["same-model", "another-model", "another-format"],
)
def test_the_store_never_answers_for_another_judge(tmp_path, capsys, second, more, stored):
    _, first = _grade(tmp_path, "a.jsonl", "stand-in-judge")
    assert len(first.graded) == 3 + 1  # the rows and the canary
    _, again = _grade(tmp_path, "b.jsonl", second, *more)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    if stored:
        assert again.graded == [] and summary["stored_samples"] == 3 and summary["samples"] == 0
    else:
        assert len(again.graded) == 4 and summary["stored_samples"] == 0 and summary["samples"] == 3
