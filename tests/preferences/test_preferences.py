"""``build_preference_dataset`` and ``pairs_file`` (the same row code): exact tests on a scripted judge, then
a real vLLM judge and TRL's DPOTrainer."""

from __future__ import annotations

import json
import math

import pytest

from prom_reward import ConfigError, InputError, PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import BackendError, OutputError
from prom_reward.jobs.pairs import build_preference_dataset
from prom_reward.jobs.run import pairs_file
from prom_reward.jobs.source import read_rows
from prom_reward.preferences.config import PreferenceConfig

ABS_SPLIT = ("###Response to evaluate:\n", "\n\n###Score Rubrics:")
REL_SPLIT = ("###Response A:\n", "\n\n###Response B:\n", "\n\n###Score Rubric:")


def graded_response(req: GenerationRequest) -> str:
    return req.user.split(ABS_SPLIT[0])[1].split(ABS_SPLIT[1])[0].split("\n\n###Reference Answer")[0]


def compared_responses(req: GenerationRequest) -> tuple[str, str]:
    body = req.user.split(REL_SPLIT[0])[1]
    a, rest = body.split(REL_SPLIT[1])
    return a, rest.split(REL_SPLIT[2])[0]


class Judged(ScriptedBackend):
    """Answers from tables keyed by response text.

    ``scores``: response -> a score, or a list of scores consumed one per grade (the last repeats);
    ``rank``: response -> strength for pairwise prompts (higher wins; equal -> "no verdict").
    ``fail_at``: raise ``BackendError`` on that generate call (1-based), once, as a server that is down would.
    """

    def __init__(self, scores=None, rank=None, fail_at=None, verdicts=None):
        self.scores = {k: (list(v) if isinstance(v, list) else [v]) for k, v in (scores or {}).items()}
        self.rank = rank or {}
        self.verdicts = verdicts  # optional fn(a, b) -> text for pairwise prompts
        self.fail_at = fail_at
        self.judged: list[str | tuple[str, str]] = []
        super().__init__(respond=self._answer)

    def _answer(self, req, i):
        if "###Response to evaluate:" in req.user:
            r = graded_response(req)
            self.judged.append(r)
            queue = self.scores[r]
            s = queue.pop(0) if len(queue) > 1 else queue[0]
            return f"Feedback on {r}. [RESULT] {s}" if s is not None else "no verdict here"
        a, b = compared_responses(req)
        self.judged.append((a, b))
        if self.verdicts is not None:
            return self.verdicts(a, b)
        if self.rank[a] == self.rank[b]:
            return "cannot decide"
        return f"Comparing {a} and {b}. [RESULT] {'A' if self.rank[a] > self.rank[b] else 'B'}"

    def generate(self, requests):
        if self.fail_at is not None and len(self.calls) + 1 == self.fail_at:
            self.fail_at = None
            raise BackendError("simulated crash")
        return super().generate(requests)


def make_judge(backend, **kw):
    return PrometheusJudge(backend=backend, max_retries=0, **kw)


ROWS = [
    {"id": "r0", "prompt": "Q0?", "completions": ["a0", "b0", "c0"], "reference_answer": "ref0"},
    {"id": "r1", "prompt": "Q1?", "completions": ["a1", "b1", "c1"]},
]


def test_best_vs_worst_picks_highest_and_lowest_in_one_call():
    b = Judged(scores={"a0": 2, "b0": 5, "c0": 1, "a1": 3, "b1": 3, "c1": 4})
    ds, stats = build_preference_dataset(make_judge(b), ROWS, rubric="helpfulness", keep_columns=("id",))
    assert len(b.calls) == 1 and len(b.calls[0]) == 6  # every completion of the chunk in one batch
    assert "###Reference Answer (Score 5):\nref0" in b.calls[0][0].user
    assert ds["chosen"] == ["b0", "c1"] and ds["rejected"] == ["c0", "a1"]  # ties: the first one
    assert ds["score_chosen"] == [5.0, 4.0] and ds["score_rejected"] == [1.0, 3.0] and ds["margin"] == [4.0, 1.0]
    assert ds[0]["feedback_chosen"] == "Feedback on b0." and ds[0]["feedback_rejected"] == "Feedback on c0."
    assert ds["source_index"] == [0, 1] and ds["id"] == ["r0", "r1"] and ds["tie_rounds"] == [0, 0]
    assert (ds[0]["chosen_index"], ds[0]["rejected_index"]) == (1, 2)
    assert (stats.rows, stats.pairs, stats.skipped) == (2, 2, {})


def test_all_equal_grades_are_broken_by_temperature_one_rounds():
    # first grade ties (3/3); compare_by_grades re-grades both once (3/3), then rounds at temperature 1.0
    b = Judged(scores={"x": [3, 3, 3, 4], "y": [3, 3, 3, 2]})
    judge = make_judge(b, sampling={"temperature": 0.0}, max_tie_rounds=5)
    ds, stats = build_preference_dataset(judge, [{"prompt": "Q", "completions": ["x", "y"]}], rubric="helpfulness")
    assert len(b.calls) == 4  # grade, re-grade, 2 tie rounds
    assert [c[0].sampling.temperature for c in b.calls] == [0.0, 0.0, 1.0, 1.0]
    assert ds["chosen"] == ["x"] and ds["score_chosen"] == [4.0] and ds["score_rejected"] == [2.0]
    assert ds["tie_rounds"] == [2] and ds["margin"] == [2.0]
    assert (stats.tie_breaks, stats.tie_rounds, stats.pairs) == (1, 2, 1)


def test_unbroken_tie_is_skipped_after_max_tie_rounds():
    b = Judged(scores={"x": 3, "y": 3, "z": 3})
    ds, stats = build_preference_dataset(
        make_judge(b), [{"prompt": "Q", "completions": ["x", "y", "z"]}], rubric="helpfulness", max_tie_rounds=2
    )
    assert len(b.calls) == 1 + 1 + 2 and len(ds) == 0
    assert b.judged == ["x", "y", "z"] + ["x", "y"] * 3  # the first two are re-judged
    assert stats.skipped == {"tie": 1} and stats.rows_without_pairs == 1 and stats.tie_rounds == 2
    assert "margin" in ds.column_names and "chosen" in ds.column_names


def test_failed_grades_skip_the_row():
    b = Judged(scores={"a0": 4, "b0": None, "c0": 1, "a1": 5, "b1": 2, "c1": 1})
    ds, stats = build_preference_dataset(make_judge(b), ROWS, rubric="helpfulness")
    assert ds["source_index"] == [1] and stats.skipped == {} and stats.failed == 1 and stats.rows_without_pairs == 1


def test_min_margin_in_score_points():
    b = Judged(scores={"a0": 4, "b0": 3, "c0": 4, "a1": 5, "b1": 2, "c1": 1})
    ds, stats = build_preference_dataset(make_judge(b), ROWS, rubric="helpfulness", min_margin=2)
    assert ds["source_index"] == [1] and ds["margin"] == [4.0] and stats.skipped == {"below_min_margin": 1}


def test_all_pairs_from_swapped_verdicts():
    row = {"prompt": "Q", "completions": ["weak", "best", "mid"]}
    b = Judged(rank={"weak": 0, "best": 2, "mid": 1})
    ds, stats = build_preference_dataset(make_judge(b), [row], rubric="helpfulness", strategy="all_pairs")
    assert len(b.calls) == 1 and len(b.calls[0]) == 6  # 3 pairs x both orders, one batch
    assert b.judged[:3] == [("weak", "best"), ("weak", "mid"), ("best", "mid")]
    assert b.judged[3:] == [("best", "weak"), ("mid", "weak"), ("mid", "best")]
    assert list(zip(ds["chosen"], ds["rejected"], strict=True)) == [("best", "weak"), ("mid", "weak"), ("best", "mid")]
    assert ds["score_chosen"] == [1.0] * 3 and ds["score_rejected"] == [0.0] * 3 and ds["margin"] == [1.0] * 3
    assert ds[0]["feedback"] == "Comparing weak and best." and ds["swap_agreement"] == [True] * 3
    assert (stats.pairs, stats.skipped) == (3, {})


def test_all_pairs_skips_disagreements_ties_failures_and_small_margins():
    def verdicts(a, b):
        if {a, b} == {"p", "q"}:
            return "[RESULT] A"  # position bias: the orders disagree
        if {a, b} == {"p", "r"}:
            return "no verdict"
        return "[RESULT] A" if a == "q" else "[RESULT] B"  # q beats r in both orders

    row = {"prompt": "Q", "completions": ["p", "q", "r"]}
    ds, stats = build_preference_dataset(
        make_judge(Judged(verdicts=verdicts)), [row], rubric="helpfulness", strategy="all_pairs"
    )
    assert list(zip(ds["chosen"], ds["rejected"], strict=True)) == [("q", "r")]
    assert stats.skipped == {"swap_disagreement": 1} and stats.failed == 1

    # 3 samples: A, A, B in the first order, B, B, B swapped -> P(q wins) = (2/3 + 1) / 2, margin 2/3
    outputs = iter(["[RESULT] A", "[RESULT] A", "[RESULT] B"] + ["[RESULT] B"] * 3)
    judge = make_judge(ScriptedBackend(respond=lambda req, i: next(outputs)), num_samples=3)
    one = {"prompt": "Q", "completions": ["q", "r"]}
    ds, _ = build_preference_dataset(judge, [one], rubric="helpfulness", strategy="all_pairs")
    assert ds["score_chosen"][0] == pytest.approx(5 / 6) and ds["margin"][0] == pytest.approx(2 / 3)
    outputs = iter(["[RESULT] A", "[RESULT] A", "[RESULT] B"] + ["[RESULT] B"] * 3)
    judge = make_judge(ScriptedBackend(respond=lambda req, i: next(outputs)), num_samples=3)
    ds, stats = build_preference_dataset(judge, [one], rubric="helpfulness", strategy="all_pairs", min_margin=0.7)
    assert len(ds) == 0 and stats.skipped == {"below_min_margin": 1}


def test_conversational_rows_keep_the_message_layout():
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}]
    good, bad = [{"role": "assistant", "content": "Paris."}], [{"role": "assistant", "content": "Rome."}]
    b = Judged(scores={"Paris.": 5, "Rome.": 1})
    ds, _ = build_preference_dataset(
        make_judge(b), [{"prompt": prompt, "completions": [bad, good]}], rubric="factual_validity"
    )
    assert "###The instruction to evaluate:\nCapital of France?\n" in b.calls[0][0].user  # judge reads text
    assert ds[0]["prompt"] == prompt and ds[0]["chosen"] == good and ds[0]["rejected"] == bad
    from trl.data_utils import is_conversational

    assert is_conversational(ds[0])


def test_rubric_per_row_and_long_layout():
    long = [
        {"prompt": "Q0", "completion": "a", "rubric": "honesty"},
        {"prompt": "Q0", "completion": "b"},
        {
            "prompt": "Q1",
            "completion": "c",
            "rubric": {
                "criteria": "Is it short?",
                "score1_description": "1",
                "score2_description": "2",
                "score3_description": "3",
                "score4_description": "4",
                "score5_description": "5",
            },
        },
        {"prompt": "Q1", "completion": "d"},
    ]
    b = Judged(scores={"a": 1, "b": 2, "c": 5, "d": 4})
    ds, stats = build_preference_dataset(make_judge(b), long, layout="long")
    assert list(zip(ds["prompt"], ds["chosen"], ds["rejected"], strict=True)) == [("Q0", "b", "a"), ("Q1", "c", "d")]
    assert "truthful" in b.calls[0][0].user and "[Is it short?]" in b.calls[0][2].user
    assert stats.rows == 4  # input rows, in 2 groups


@pytest.mark.parametrize(
    "row, field, index",
    [
        ({"completions": ["a", "b"]}, "prompt", 1),
        ({"prompt": "Q", "completions": "not a list"}, "completions", 1),
        ({"prompt": "Q", "completions": ["a", 7]}, "completions[1]", 1),
        ({"prompt": "Q", "completions": ["a", [{"role": "assistant", "content": "b"}]]}, "completions[1]", 1),
        ({"prompt": [{"role": "user", "content": "Q"}], "completions": ["a", "b"]}, "completions[0]", 1),
        ({"prompt": "Q", "completions": ["a", "b"], "reference_answer": 3}, "reference_answer", 1),
        ({"prompt": "Q", "completions": ["a", "b"], "rubric": "no-such-rubric"}, "rubric", 1),
        ({"prompt": "Q", "completions": ["a", "b"], "rubric": None}, "rubric", 1),
    ],
)
def test_bad_input_names_row_and_field_before_judging(row, field, index):
    b = Judged(scores={"a": 1, "b": 2})
    rows = [{"prompt": "fine", "completions": ["a", "b"], "rubric": "helpfulness"}, row]
    with pytest.raises(InputError) as e:
        build_preference_dataset(make_judge(b), rows)
    assert (e.value.index, e.value.field) == (index, field) and f"row {index}" in str(e.value)
    assert b.calls == []  # the chunk was checked before any generation


def test_bad_input_in_a_later_batch_is_found_before_any_judging(tmp_path):
    b = Judged(scores={"a": 1, "b": 2})
    rows = [{"prompt": f"Q{i}", "completions": ["a", "b"]} for i in range(3)] + [{"prompt": "Q3"}]
    with pytest.raises(InputError, match="row 3"):
        build_preference_dataset(make_judge(b), rows, rubric="helpfulness", batch_size=2)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"in.jsonl:4: row 3: column 'completions' missing"):
        pairs_file(src, tmp_path / "p.jsonl", {"backend": b}, rubric="helpfulness", batch_size=2, progress=False)
    assert b.calls == [] and not (tmp_path / "p.jsonl").exists()


def test_pairwise_only_rubric_needs_all_pairs():
    row = {"prompt": "Q", "completions": ["a", "b"]}
    with pytest.raises(ConfigError, match="rubric: .*score descriptions.*judge format 'prometheus2'"):
        build_preference_dataset(make_judge(Judged(scores={})), [row], rubric={"criteria": "Kind?"})
    ds, _ = build_preference_dataset(
        make_judge(Judged(rank={"a": 1, "b": 0})), [row], rubric={"criteria": "Kind?"}, strategy="all_pairs"
    )
    assert ds["chosen"] == ["a"]


def test_config_is_validated():
    for bad in (
        {"strategy": "best"},
        {"min_margin": float("nan")},
        {"num_samples": 0},
        {"max_tie_rounds": -1},
        {"keep_columns": ("margin",)},
        {"layout": "tall"},
    ):
        with pytest.raises(ConfigError):
            PreferenceConfig(**bad)


# --- resuming ------------------------------------------------------------------------------------


def resume_rows(n=7):
    rows = []
    for i in range(n):
        scores = [(i % 5) + 1, ((i + 2) % 5) + 1, ((i + 4) % 5) + 1]
        rows.append({"prompt": f"Q{i}", "completions": [f"c{i}_{k}" for k in range(3)], "scores": scores})
    rows[1]["scores"] = [3, 3, 3]  # an unbreakable tie: skipped, and must not be re-judged either
    rows[4]["scores"] = [None, 2, 4]  # a failure
    return rows


def scripted_for(rows, **kw):
    return Judged(
        scores={c: s for r in rows for c, s in zip(r["completions"], r["scores"], strict=True)},
        rank={c: s or 0 for r in rows for c, s in zip(r["completions"], r["scores"], strict=True)},
        **kw,
    )


def _file(tmp_path, rows):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


@pytest.mark.parametrize("strategy", ["best_vs_worst", "all_pairs"])
def test_resume_after_a_backend_failure_judges_only_that_batch_again(tmp_path, strategy):
    """``pairs_file``: a batch whose judge call failed is written as ``backend_failed`` skip records; a resume
    judges that batch again (and nothing else), and the files equal an uninterrupted run's."""
    rows = resume_rows()
    src = _file(tmp_path, rows)
    opts = dict(rubric="helpfulness", strategy=strategy, batch_size=2, max_tie_rounds=1, progress=False)
    full_backend = scripted_for(rows)
    full = pairs_file(src, tmp_path / "full.jsonl", {"backend": full_backend, "max_retries": 0}, **opts)
    assert full.pairs > 0 and (full.skipped or full.failed)

    out = tmp_path / "pairs.jsonl"
    crash_at = 5 if strategy == "best_vs_worst" else 3  # the first call of the 3rd batch
    first = scripted_for(rows, fail_at=crash_at)
    s = pairs_file(src, out, {"backend": first, "max_retries": 0}, outage={"budget_s": 0}, **opts)
    assert s.failed >= 2 and s.backend_failed == 2
    second = scripted_for(rows)
    s = pairs_file(src, out, {"backend": second, "max_retries": 0}, resume=True, **opts)
    assert (s.resumed_rows, s.rows, s.retried_rows) == (5, 2, 2)
    assert not any(c in str(x) for x in second.judged for r in rows[:4] + rows[6:] for c in r["completions"])
    assert out.read_text() == (tmp_path / "full.jsonl").read_text()
    assert (tmp_path / "pairs.skipped.jsonl").read_text() == (tmp_path / "full.skipped.jsonl").read_text()


def test_resume_refuses_other_options(tmp_path):
    rows = resume_rows(5)
    src, out = _file(tmp_path, rows), tmp_path / "pairs.jsonl"
    pairs_file(src, out, {"backend": scripted_for(rows)}, rubric="helpfulness", max_tie_rounds=0, progress=False)
    with pytest.raises(OutputError, match="option strategy: 'best_vs_worst' then, 'all_pairs' now"):
        pairs_file(
            src,
            out,
            {"backend": scripted_for(rows)},
            rubric="helpfulness",
            max_tie_rounds=0,
            resume=True,
            strategy="all_pairs",
            progress=False,
        )
    with pytest.raises(ConfigError, match=".jsonl"):
        pairs_file(src, tmp_path / "p.parquet", {"backend": scripted_for(rows)}, rubric="helpfulness")


def test_file_input_and_in_memory_result_match(tmp_path):
    rows = resume_rows(5)
    src = _file(tmp_path, rows)
    a, _ = build_preference_dataset(make_judge(scripted_for(rows)), src, rubric="helpfulness", max_tie_rounds=0)
    b, _ = build_preference_dataset(make_judge(scripted_for(rows)), rows, rubric="helpfulness", max_tie_rounds=0)
    pairs_file(
        src,
        tmp_path / "o.jsonl",
        make_judge(scripted_for(rows)),
        rubric="helpfulness",
        max_tie_rounds=0,
        progress=False,
    )
    assert a.to_list() == b.to_list() == list(read_rows(tmp_path / "o.jsonl")) and a["source_index"] == [0, 2, 3]
    assert list(read_rows(tmp_path / "o.skipped.jsonl")) == [
        {"source_index": 1, "reason": "tie", "pair": [0, 1], "judge_error": None},
        {
            "source_index": 4,
            "reason": "judge_failed",
            "pair": None,
            "judge_error": "completion 0: after its retries the judge gave no verdict in 1 sample(s) (last: "
            "prometheus2: no '[RESULT] 1-5' verdict at the end of the feedback)",
        },
    ]


# --- a real judge, and TRL's DPOTrainer -----------------------------------------------------------

CONVERSATIONS = [
    ("What is the capital of France?", ["The capital of France is Paris.", "I like turtles.", "Lyon, I think."]),
    ("What is 2 + 2?", ["2 + 2 = 4.", "Five.", "banana banana"]),
    ("Name a primary colour.", ["Red is a primary colour.", "The sky.", "Colours are nice."]),
]


def conversational_rows():
    return [
        {"prompt": [{"role": "user", "content": q}], "completions": [[{"role": "assistant", "content": c}] for c in cs]}
        for q, cs in CONVERSATIONS
    ]


@pytest.fixture(scope="module")
def smollm2_pairs(smollm2_engine):
    judge = PrometheusJudge(backend=smollm2_engine, force_verdict="always", sampling={"max_tokens": 16})
    results = {
        s: build_preference_dataset(judge, conversational_rows(), rubric="helpfulness", strategy=s, max_tie_rounds=2)
        for s in ("best_vs_worst", "all_pairs")
    }
    return results, judge.stats


@pytest.mark.integration
@pytest.mark.smollm2
def test_real_judge_builds_pairs(smollm2_pairs):
    results, judge_stats = smollm2_pairs
    assert judge_stats.forced > 0 and judge_stats.calls >= 2  # SmolLM2 needs forced verdicts
    total = 0
    for strategy, (ds, stats) in results.items():
        candidates = 3 if strategy == "best_vs_worst" else 9
        assert stats.rows == 3 and stats.pairs + stats.failed + sum(stats.skipped.values()) == candidates
        assert len(ds) == stats.pairs
        total += len(ds)
        for r in ds:
            _, completions = CONVERSATIONS[r["source_index"]]
            assert r["chosen"][0]["content"] == completions[r["chosen_index"]]
            assert r["rejected"][0]["content"] == completions[r["rejected_index"]]
            assert r["chosen_index"] != r["rejected_index"] and r["margin"] >= 0
            low, high = (1, 5) if strategy == "best_vs_worst" else (0, 1)
            assert low <= r["score_rejected"] <= r["score_chosen"] <= high
    assert total > 0


@pytest.mark.integration
@pytest.mark.smollm2
def test_dpo_trainer_consumes_the_pairs(smollm2_pairs, tiny_model_dir, tmp_path):
    from datasets import concatenate_datasets
    from trl import DPOConfig, DPOTrainer

    cols = ["prompt", "chosen", "rejected"]
    parts = [ds.select_columns(cols) for ds, _ in smollm2_pairs[0].values() if len(ds)]
    train = concatenate_datasets(parts)
    args = DPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        max_length=128,
        seed=0,
    )
    trainer = DPOTrainer(model=str(tiny_model_dir), args=args, train_dataset=train)
    result = trainer.train()
    assert result.global_step == 2 and math.isfinite(result.training_loss)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    assert any("rewards/chosen" in h and "rewards/margins" in h for h in logs)
