"""The reference replay backend on the shared vicuna_eval.json (recorded GPT-4 judgments)."""

import json

import pytest

from benchmarks.reference_replay import ReferenceReplayBackend, _list
from prom_reward import InputError, PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.experimental import CascadeJudge
from prom_reward.format.templates import parse_absolute_prompt


@pytest.fixture(scope="module")
def vicuna(data_dir):
    path = data_dir / "vicuna_eval.json"
    return path, json.loads(path.read_text(encoding="utf-8"))


def test_replays_the_recorded_gpt4_scores_through_a_judge(vicuna):
    path, rows = vicuna
    backend = ReferenceReplayBackend.from_vicuna_eval(path)
    assert "reference_replay" in backend.name and "GPT-4" in backend.name and len(backend.records) == 320
    judge = PrometheusJudge(backend=backend, num_samples=3, neutralize_markers=False)
    picked = [rows[0], rows[101], rows[319]]
    parts = [parse_absolute_prompt(r["instruction"]) for r in picked]
    grades = judge.grade(
        [p.instruction for p in parts],
        [p.response for p in parts],
        [p.rubric for p in parts],
        [p.reference_answer for p in parts],
    )
    for g, row in zip(grades, picked, strict=True):
        recorded = [int(s) for s in _list(row["gpt4_score"])]
        assert list(g.scores) == recorded and g.score == pytest.approx(sum(recorded) / 3)
        assert g.feedback == _list(row["gpt4_feedback"])[0].strip()
    assert backend.replayed == 9


def test_unknown_item_is_an_input_error_naming_it(vicuna):
    backend = ReferenceReplayBackend.from_vicuna_eval(vicuna[0])
    known = GenerationRequest("s", vicuna[1][0]["instruction"])
    with pytest.raises(InputError, match="item 1 has no recorded judgment") as e:
        backend.generate([known, GenerationRequest("s", "a prompt the file does not have")])
    assert e.value.index == 1 and backend.replayed == 0  # nothing replayed before the check
    with pytest.raises(InputError, match="cannot force"):
        backend.generate([GenerationRequest("s", vicuna[1][0]["instruction"], assistant_prefix="x [RESULT] ")])
    with pytest.raises(InputError, match="at least one output"):
        ReferenceReplayBackend({"p": []})


def test_replay_as_cascade_fallback(vicuna):
    path, rows = vicuna
    parts = [parse_absolute_prompt(r["instruction"]) for r in rows[:2]]
    primary = PrometheusJudge(
        backend="scripted",
        outputs=["first [RESULT] 1", "second [RESULT] 1", "x [RESULT] 5"],
        num_samples=1,
        max_retries=0,
    )
    reference = PrometheusJudge(backend=ReferenceReplayBackend.from_vicuna_eval(path), neutralize_markers=False)
    cascade = CascadeJudge(primary, reference, route_fraction=1.0, indicator="sample_agreement")
    out = cascade.grade(
        [p.instruction for p in parts],
        [p.response for p in parts],
        [p.rubric for p in parts],
        [p.reference_answer for p in parts],
    )
    assert [g.decided_by for g in out] == ["fallback", "fallback"]
    assert [g.score for g in out] == [float(_list(r["gpt4_score"])[0]) for r in rows[:2]]


def test_autoj_human_labels_replay_in_both_orders(data_dir):
    path = data_dir / "autoj_pairwise.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:40]]
    decided = [r for r in rows if r["label"] in (0, 1)][:3]
    tie = next(r for r in rows if r["label"] == 2)
    backend = ReferenceReplayBackend.from_autoj_pairwise(path)
    assert "human labels" in backend.name
    judge = PrometheusJudge(backend=backend, neutralize_markers=False)
    verdicts = judge.compare(
        [r["prompt"] for r in decided],
        [r["response 1"] for r in decided],
        [r["response 2"] for r in decided],
        "helpfulness",
        swap=True,
    )
    assert [v.winner for v in verdicts] == ["A" if r["label"] == 0 else "B" for r in decided]
    assert all(v.swap_agreement for v in verdicts)
    with pytest.raises(InputError, match="item 0 has no recorded judgment"):
        judge.compare([tie["prompt"]], [tie["response 1"]], [tie["response 2"]], "helpfulness")
