"""Issue 14 (second half): comparative pairwise feedback written by a judge (verdict-checked, resumable
through the judgment store), the explicit feedback choice, verdict balancing of the pocket configs, and
the Prometheus 2 configs' learning rate and global batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest, GenerationResult
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.errors import BackendError, ConfigError, JudgeUnavailableError
from train_judge.balance import balance_by_verdict
from train_judge.comparative import COMPARE_SYSTEM_PROMPT, ComparativeWriter
from train_judge.config import load_config
from train_judge.data import FeedbackRecord, build_preference_collection, records_summary
from train_judge.layouts import load_preference_collection, save_preference_collection
from train_judge.sft import load_records

CONFIGS = Path(__file__).resolve().parents[2] / "train_judge" / "configs"
RUBRIC = "[Is it right?]\nScore 1: No.\nScore 2: Barely.\nScore 3: Partly.\nScore 4: Mostly.\nScore 5: Yes."


def _recs() -> list[FeedbackRecord]:
    # one instruction, scores 1, 3, 5: three pairs (winner at A, B, A)
    return [
        FeedbackRecord("Explain tides.", f"Answer {s}.", "The reference.", RUBRIC, f"Absolute feedback {s}.", s, "g")
        for s in (1, 3, 5)
    ]


def _verdict(req: GenerationRequest) -> str:
    return req.user.split("###Verdict: Response ", 1)[1][0]


def test_prompt_carries_everything_and_verdicts_are_checked() -> None:
    seen: list[GenerationRequest] = []

    def respond(req: GenerationRequest, _: int) -> str:
        seen.append(req)
        w = _verdict(req)
        if req.attempt == 0 and len(seen) == 1:
            return f"Both explain tides. [RESULT] {'B' if w == 'A' else 'A'}"  # contradicts the label: rejected
        if req.attempt == 0 and len(seen) == 2:
            return "No verdict at all."  # rejected
        return f"Feedback: Both explain tides; only Response {w} is right. [RESULT] {w}"

    writer = ComparativeWriter(ScriptedBackend(respond=respond), max_attempts=2)
    pairs = build_preference_collection(_recs(), feedback="model", judge=writer)
    assert [p.winner for p in pairs] == ["A", "B", "A"]
    assert [p.feedback_source for p in pairs] == ["model"] * 3
    assert all(
        p.completion == f"Both explain tides; only Response {p.winner} is right. [RESULT] {p.winner}" for p in pairs
    )
    first = seen[0]
    assert first.system == COMPARE_SYSTEM_PROMPT and first.sampling.logprobs is None
    for text in (
        "###Response A:\nAnswer 3.",
        "###Response B:\nAnswer 1.",
        "Absolute feedback 3.",
        "Absolute feedback 1.",
        "###Feedback on Response A (score 3)",
        "The reference.",
        RUBRIC,
        "commonalities",
        "###Verdict: Response A is better.",
    ):
        assert text in first.user
    assert [r.attempt for r in seen] == [0, 0, 0, 1, 1]  # the two rejected pairs asked again
    assert (writer.report.accepted, writer.report.rejected, writer.report.failed) == (3, 2, 0)


@pytest.mark.parametrize("on_failure", ["drop", "concatenate", "raise"])
def test_pairs_the_judge_never_gets_right(on_failure: str) -> None:
    def respond(req: GenerationRequest, _: int) -> str:
        w = _verdict(req)
        return f"ok [RESULT] {w}" if w == "B" else "ok [RESULT] B"  # every A-pair contradicted

    backend = ScriptedBackend(respond=respond)
    if on_failure == "raise":
        with pytest.raises(ConfigError, match="no feedback matching the known winner for 2 of 3"):
            build_preference_collection(_recs(), feedback="model", judge=backend, on_failure=on_failure)
        return
    pairs = build_preference_collection(_recs(), feedback="model", judge=backend, on_failure=on_failure)
    assert len(backend.calls) == 3  # 3 attempts; only the failing pairs re-asked
    assert [len(c) for c in backend.calls] == [3, 2, 2]
    if on_failure == "drop":
        assert [(p.winner, p.feedback_source) for p in pairs] == [("B", "model")]
    else:
        assert [(p.winner, p.feedback_source) for p in pairs] == [
            ("A", "concatenate"),
            ("B", "model"),
            ("A", "concatenate"),
        ]
        assert pairs[0].feedback.endswith("Response A is better on this criteria.")


class _Outage(ScriptedBackend):
    """A judge whose transport fails the requests ``down(request)`` picks (no completions, an ``error``)."""

    def __init__(self, respond, down) -> None:  # type: ignore[no-untyped-def]
        super().__init__(respond=respond)
        self.down = down

    def generate(self, requests):  # type: ignore[no-untyped-def]
        good = super().generate(requests)
        return [
            GenerationResult((), error="connection refused: 127.0.0.1:9") if self.down(r) else g
            for r, g in zip(requests, good, strict=True)
        ]


@pytest.mark.parametrize("on_failure", ["drop", "concatenate"])
def test_a_judge_that_is_down_is_an_error_not_dropped_pairs(tmp_path: Path, on_failure: str) -> None:
    """Before: every unanswered pair counted as 'rejected' and was dropped (or concatenated) as if the judge
    had answered wrong, so an outage silently changed the training data."""

    def respond(req: GenerationRequest, _: int) -> str:
        return f"Both explain tides. [RESULT] {_verdict(req)}"

    store = tmp_path / "c.sqlite"
    backend = _Outage(respond, down=lambda r: "Answer 1." in r.user)  # the two pairs with the score-1 answer
    writer = ComparativeWriter(backend, store=store)
    with pytest.raises(JudgeUnavailableError, match=r"no answer for 2 of 3 comparisons after 3 attempts .*refused"):
        build_preference_collection(_recs(), feedback="model", judge=writer, on_failure=on_failure)
    assert (writer.report.unanswered, writer.report.rejected) == (6, 0) and [len(c) for c in backend.calls] == [3, 2, 2]
    writer.close()
    # the judge back: the re-run asks only what was not answered
    again = ComparativeWriter(ScriptedBackend(respond=respond), store=store)
    pairs = build_preference_collection(_recs(), feedback="model", judge=again, on_failure=on_failure)
    assert [p.feedback_source for p in pairs] == ["model"] * 3 and (again.store_hits, again.store_misses) == (1, 2)
    again.close()
    # an outage on one attempt, then an answer: nothing raised, the pair is kept
    flaky = _Outage(respond, down=lambda r: r.attempt == 0 and "Answer 1." in r.user)
    assert len(build_preference_collection(_recs(), feedback="model", judge=flaky)) == 3


def test_choice_is_required_and_explained() -> None:
    with pytest.raises(ConfigError, match="feedback='model' with judge=.*feedback='concatenate'"):
        build_preference_collection(_recs())
    with pytest.raises(ConfigError, match="feedback='model' needs judge="):
        build_preference_collection(_recs(), feedback="model")
    with pytest.raises(ConfigError, match="on_failure"):
        build_preference_collection(_recs(), feedback="concatenate", on_failure="skip")
    with pytest.raises(ConfigError, match="expected a PrometheusJudge or a backend"):
        ComparativeWriter(object())


def test_resume_from_the_store_recomputes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "comparative.sqlite"
    calls = {"n": 0}

    def respond(req: GenerationRequest, _: int) -> str:
        calls["n"] += 1
        w = _verdict(req)
        # the first pair is wrong once: its retry (attempt 1) is stored too
        return f"Sample {calls['n']}. [RESULT] {'B' if calls['n'] == 1 else w}"

    first = build_preference_collection(_recs(), feedback="model", judge=ScriptedBackend(respond=respond), store=store)
    assert calls["n"] == 4

    def must_not_run(req: GenerationRequest, _: int) -> str:
        raise BackendError("the re-run generated something")

    writer = ComparativeWriter(ScriptedBackend(respond=must_not_run), store=store)
    again = build_preference_collection(_recs(), feedback="model", judge=writer)
    assert again == first and (writer.store_hits, writer.store_misses) == (4, 0)
    writer.close()
    # the judge's own store works the same way (PrometheusJudge(store=...))
    judge = PrometheusJudge(backend=ScriptedBackend(respond=must_not_run), store=store)
    assert build_preference_collection(_recs(), feedback="model", judge=judge) == first
    # saved and read back as a Preference Collection file, labels kept
    path = tmp_path / "pc.jsonl"
    assert save_preference_collection(first, path) == 3
    back = load_preference_collection(str(path))
    assert [(p.response_a, p.winner, p.feedback, p.feedback_source) for p in back] == [
        (p.response_a, p.winner, p.feedback, p.feedback_source) for p in first
    ]


def test_real_vllm_engine_plumbing_and_resume(vllm_engine, tmp_path: Path) -> None:
    # a random tiny model writes no sensible feedback: this checks the requests reach a real engine,
    # its rejected outputs fall back as labelled, and the store replays everything on a re-run
    store = tmp_path / "engine.sqlite"
    writer = ComparativeWriter(vllm_engine, store=store, sampling={"max_tokens": 8, "seed": 0}, max_attempts=2)
    pairs = build_preference_collection(_recs(), feedback="model", judge=writer, on_failure="concatenate")
    assert len(pairs) == 3 and writer.store_misses == writer.report.requests > 0
    assert all(p.feedback_source in ("model", "concatenate") for p in pairs)
    writer.close()
    again = ComparativeWriter(vllm_engine, store=store, sampling={"max_tokens": 8, "seed": 0}, max_attempts=2)
    assert build_preference_collection(_recs(), feedback="model", judge=again, on_failure="concatenate") == pairs
    assert again.store_misses == 0 and again.store_hits == writer.report.requests
    again.close()


def test_balance_by_verdict_counts_and_seed() -> None:
    recs = [FeedbackRecord("q", f"r{i}", None, RUBRIC, "f", s) for i, s in enumerate([1] * 2 + [4] * 7 + [5] * 3)]
    assert records_summary(balance_by_verdict(recs, "min")) == {"1": 2, "4": 2, "5": 2}
    up = balance_by_verdict(recs, "max", seed=1)
    assert records_summary(up) == {"1": 7, "4": 7, "5": 7} and set(recs) <= set(up)  # every record kept
    assert balance_by_verdict(recs, 4, seed=3) == balance_by_verdict(recs, 4, seed=3)
    assert balance_by_verdict(recs, 4, seed=3) != balance_by_verdict(recs, 4, seed=4)
    with pytest.raises(ConfigError, match="'min'.*'max'"):
        balance_by_verdict(recs, 0)


@pytest.mark.parametrize("name, per_score", [("pocket_absolute", 16), ("pocket_absolute_gpu", 144)])
def test_pocket_configs_balance_scores(name: str, per_score: int, data_dir: Path) -> None:
    cfg = load_config(CONFIGS / f"{name}.yaml", data_path=str(data_dir / "vicuna_eval.json"))
    assert cfg.verdict_balance == per_score
    raw = load_records(cfg.replace(verdict_balance=None))
    assert records_summary(raw) == {"1": 12, "2": 24, "3": 59, "4": 371, "5": 254}  # what the shipped judge saw
    assert records_summary(load_records(cfg)) == {str(s): per_score for s in range(1, 6)}


def test_prometheus2_configs_follow_the_paper_table() -> None:
    gpus = yaml.safe_load((CONFIGS / "accelerate_zero3.yaml").read_text())["num_processes"]
    assert gpus == 8
    table = {"prometheus2_7b": (1e-5, 4), "prometheus2_8x7b": (1e-5, 8)}  # Learning Rate, Train Batch Size
    for name, (lr, batch) in table.items():
        cfg = load_config(CONFIGS / f"{name}.yaml")
        assert cfg.learning_rate == lr
        # the table's batch is read as per device (stated in both configs); global = per device x accum x GPUs
        assert cfg.per_device_train_batch_size == batch and cfg.gradient_accumulation_steps == 1
        global_batch = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * gpus
        text = (CONFIGS / f"{name}.yaml").read_text()
        assert f"= {batch} x 1 x 8 = {global_batch} examples per optimizer step" in text
        assert "Learning Rate" in text and "Train Batch Size" in text
