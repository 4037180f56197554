"""``pairs`` from checklist scores (issue 34, item 4): a row with a checklist scores each completion by its
criteria (the aggregate on the judge's scale), through the checklist judging the rewards and ``grade`` use; a
scripted judge with known per-criterion verdicts gives exact scores, pairs, ties and failures."""

from __future__ import annotations

import json
import re

import pytest

from prom_reward import InputError, PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.cli.main import main
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.jobs.pairs import build_preference_dataset
from prom_reward.jobs.run import pairs_file
from tests.judges import NO_VERDICT, judge_by_format, response_of

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3}, "Shows work",
             {"criterion": "Is rude", "category": "pitfall"}]  # fmt: skip
GOOD, RUDE, WRONG, MUTE = "4 because 2+2=4", "4, dummy", "5", "4 (mute)"
VERDICTS = {(GOOD, "Says 4"): 5, (GOOD, "Shows work"): 5, (GOOD, "Is rude"): 1,
            (RUDE, "Says 4"): 5, (RUDE, "Shows work"): 1, (RUDE, "Is rude"): 5,
            (WRONG, "Says 4"): 1, (WRONG, "Shows work"): 1, (WRONG, "Is rude"): 1,
            (MUTE, "Shows work"): 5, (MUTE, "Is rude"): 1}  # fmt: skip
"""Aggregates (weighted mean, pitfall subtracting): GOOD (3+1)/4 = 1 -> 5.0; RUDE (3-1)/4 = 0.5 -> 3.0; WRONG 0 -> 1.0;
MUTE: its essential criterion undecided, so no aggregate."""
RUBRIC_GRADES = {"Hello!": 5, "No.": 2}
CRITERION = re.compile(r"\[Does the response (?:satisfy this criterion|fall into this pitfall): (.*?)\?\]")


def judge(seen: list[tuple[str, str | None]]) -> PrometheusJudge:
    def respond(request: GenerationRequest, i: int) -> str:
        m = CRITERION.search(request.user)
        key = (response_of(request), m.group(1) if m else None)
        seen.append(key)
        score = VERDICTS.get(key) if m else RUBRIC_GRADES.get(key[0])  # type: ignore[call-overload]
        return NO_VERDICT if score is None else f"Judged. [RESULT] {score}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)


ROWS = [
    {"prompt": "2+2?", "completions": [RUDE, GOOD, WRONG], "checklist": CHECKLIST, "id": "a"},
    {"prompt": "Hi?", "completions": ["Hello!", "No."], "id": "b"},  # no checklist: graded by the rubric
    {"prompt": "2+2?", "completions": [RUDE, RUDE], "checklist": CHECKLIST, "id": "c"},  # all equal: a tie
    {"prompt": "2+2?", "completions": [GOOD, MUTE], "checklist": CHECKLIST, "id": "d"},  # essential undecided
]


def test_checklist_rows_pair_by_their_aggregate_in_one_chunk():
    seen: list[tuple[str, str | None]] = []
    ds, stats = build_preference_dataset(judge(seen), ROWS, rubric="helpfulness", keep_columns=("id",), batch_size=8)
    pairs = {p["id"]: p for p in ds}
    assert set(pairs) == {"a", "b"}
    a = pairs["a"]
    assert (a["chosen"], a["rejected"], a["chosen_index"], a["rejected_index"]) == (GOOD, WRONG, 1, 2)
    assert (a["score_chosen"], a["score_rejected"], a["margin"]) == (5.0, 1.0, 4.0)
    assert a["feedback_chosen"].count("\n") == 2  # one line per criterion
    b = pairs["b"]
    assert (b["chosen"], b["rejected"], b["margin"]) == ("Hello!", "No.", 3.0)
    assert stats.skipped == {"tie": 1} and stats.failed == 1 and stats.tie_breaks == 0
    criteria = [k for k in seen if k[1] is not None]
    assert len(criteria) == len(set(criteria)) == 4 * 3  # each distinct (completion, criterion) asked once
    assert sorted(k for k in seen if k[1] is None) == [("Hello!", None), ("No.", None)]  # no tie break asked


@pytest.mark.parametrize(
    ("row", "options", "message"),
    [
        ({"checklist": [{"criterion": "Says 4", "category": "vital"}]}, {},
         r"row 1: column 'checklist': criterion 0 .*category: expected one of .*with checklist_column$"),
        ({"checklist": "Says 4"}, {}, r"row 1: column 'checklist': .*list"),
        ({"checklist": ["Says 4"]}, {"strategy": "all_pairs"}, r"row 1: column 'checklist': .*best_vs_worst"),
    ],
)  # fmt: skip
def test_a_bad_checklist_is_refused_before_any_judging(row, options, message):
    seen: list[tuple[str, str | None]] = []
    rows = [ROWS[1], {"prompt": "2+2?", "completions": [GOOD, WRONG], **row}]
    with pytest.raises(InputError, match=message) as e:
        build_preference_dataset(judge(seen), rows, rubric="helpfulness", **options)
    assert (e.value.index, e.value.field) == (1, "checklist") and seen == []


def test_pairs_file_reads_the_checklist_column_it_is_told(tmp_path, capsys):
    seen: list[tuple[str, str | None]] = []
    src, out = tmp_path / "in.jsonl", tmp_path / "pairs.jsonl"
    src.write_text(json.dumps({"prompt": "2+2?", "completions": [RUDE, GOOD], "crit": CHECKLIST}) + "\n")
    summary = pairs_file(src, out, judge(seen), rubric="helpfulness", checklist_column="crit", progress=False)
    assert summary.pairs == 1
    pair = json.loads(out.read_text())
    assert (pair["chosen"], pair["score_chosen"], pair["score_rejected"]) == (GOOD, 5.0, 3.0)
    with pytest.raises(SystemExit) as e:
        main(["pairs", "--help"])
    assert e.value.code == 0
    assert "--checklist-col" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", [n for n in JUDGE_FORMATS if "absolute" not in JUDGE_FORMATS.get(n).tasks])
def test_a_checklist_row_in_a_format_that_cannot_grade_names_the_format_not_the_strategy(fmt):
    seen: list[GenerationRequest] = []
    rows = [{"prompt": "2+2?", "completions": [GOOD, WRONG], "checklist": ["Says 4"]}]
    with pytest.raises(InputError) as e:
        build_preference_dataset(judge_by_format(fmt, {}, seen=seen), rows, rubric="helpfulness", strategy="all_pairs")
    message = str(e.value)
    assert "row 0: column 'checklist': a checklist's criteria are graded one by one, and judge" in message
    assert f"format {fmt!r} does not judge absolute" in message and "--strategy" not in message and seen == []
