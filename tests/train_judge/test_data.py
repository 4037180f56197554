"""train_judge data builders on the shared files: pocket split, A/B balance, rendering identical to the
judge's requests (real vLLM engine tokenization), Feedback/Preference Collection column mapping."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.wire import get_wire_format
from train_judge.config import SFTRunConfig, load_config
from train_judge.data import (
    FeedbackRecord,
    PairRecord,
    build_preference_collection,
    compose_pair_feedback,
    records_summary,
)
from train_judge.examples import prompt_text, to_example, tokenize_example
from train_judge.layouts import load_feedback_collection, load_preference_collection
from train_judge.pocket import PocketData, split_prompt_ids
from train_judge.sft import pick_subset

CONFIGS = Path(__file__).resolve().parents[2] / "train_judge" / "configs"
RUBRIC = "[Is it right?]\nScore 1: No.\nScore 2: Barely.\nScore 3: Partly.\nScore 4: Mostly.\nScore 5: Yes."


@pytest.fixture(scope="module")
def pocket(data_dir: Path) -> PocketData:
    return PocketData(data_dir / "vicuna_eval.json")


def test_split_never_crosses(pocket: PocketData) -> None:
    train, dev = set(pocket.split.train), set(pocket.split.dev)
    assert not train & dev and len(train | dev) == 80 and len(dev) == 20
    assert {r.group for r in pocket.absolute("train")} == {f"vicuna-{i}" for i in train}
    assert {r.group for r in pocket.relative("train")} <= {f"vicuna-{i}" for i in train}
    assert {r.group for r in pocket.relative("dev")} <= {f"vicuna-{i}" for i in dev}
    assert {d.idx for d in pocket.dev_items()} == dev and len(pocket.dev_items()) == 80
    assert split_prompt_ids(range(1, 81), seed=0) == pocket.split  # deterministic
    assert split_prompt_ids(range(1, 81), seed=1) != pocket.split


def test_pocket_absolute_examples(pocket: PocketData) -> None:
    recs = pocket.absolute("train")
    assert len(recs) == 60 * 4 * 3
    rows = {(r["idx"], r["response_source"]): r for r in pocket.rows}
    raw = [r for r in pocket.rows if r["idx"] in pocket.split.train]
    # three per response, in the file's order, each its own GPT-4 feedback and score
    for k, r in enumerate(raw):
        for j in range(3):
            rec = recs[3 * k + j]
            assert rec.feedback == r["gpt4_feedback"][j] and rec.score == r["gpt4_score"][j]
            assert rec.completion.endswith(f" [RESULT] {r['gpt4_score'][j]}")
    assert len(rows) == 320
    # the rendered prompt is the original filled template, byte for byte (no markers to neutralise here)
    same = sum(to_example(recs[3 * k]).user == r["instruction"] for k, r in enumerate(raw))
    assert same == len(raw)


def test_pocket_pairs_follow_mean_scores_and_balance(pocket: PocketData) -> None:
    mean = {
        r["instruction"].split("###Response to evaluate:\n", 1)[1].split("\n\n###Reference Answer")[0]: sum(
            r["gpt4_score"]
        )
        / 3
        for r in pocket.rows
    }
    for part in ("train", "dev"):
        pairs = pocket.relative(part)
        counts = records_summary(pairs)
        assert abs(counts["A"] - counts["B"]) <= 1
        for p in pairs:
            win, lose = (p.response_a, p.response_b) if p.winner == "A" else (p.response_b, p.response_a)
            assert mean[win] > mean[lose]
            assert p.completion.endswith(f"Response {p.winner} is better on this criteria. [RESULT] {p.winner}")


def _recs(scores: list[int], group: str) -> list[FeedbackRecord]:
    return [FeedbackRecord("q" + group, f"r{i}", None, RUBRIC, f"fb{i}", s, group) for i, s in enumerate(scores)]


def test_preference_collection_all_pairs_exact_balance() -> None:
    recs = _recs([1, 2, 3, 4, 5], "g1") + _recs([2, 2, 4, 5, 1], "g2")
    with pytest.raises(ConfigError, match="feedback='model' with judge=.*feedback='concatenate'"):
        build_preference_collection(recs)  # never a silent default
    pairs = build_preference_collection(recs, feedback="concatenate")
    assert {p.feedback_source for p in pairs} == {"concatenate"}
    assert len(pairs) == 10 + 9  # g2 has one tied pair
    assert records_summary(pairs) in ({"A": 10, "B": 9}, {"A": 9, "B": 10})
    even = build_preference_collection(_recs([1, 2, 3, 4, 5], "g"), feedback="concatenate")
    assert records_summary(even) == {"A": 5, "B": 5}
    for p in even:
        sa, sb = int(p.response_a[1:]) + 1, int(p.response_b[1:]) + 1
        assert (sa > sb) == (p.winner == "A")
    assert (even[0].response_a, even[0].response_b, even[0].winner) == ("r1", "r0", "A")
    assert even[0].feedback == compose_pair_feedback("fb1", "fb0", "A")
    assert (even[1].response_a, even[1].response_b, even[1].winner) == ("r0", "r2", "B")
    given = build_preference_collection(_recs([5, 1], "g"), pair_feedback={(0, 1): "First is better."})
    assert given[0].feedback == "First is better." and given[0].winner == "A"
    assert given[0].feedback_source == "given"
    with pytest.raises(InputError, match="scores has 1 entries"):
        build_preference_collection(_recs([5, 1], "g"), scores=[1.0], feedback="concatenate")


def _judge_request(item: FeedbackRecord | PairRecord) -> GenerationRequest:
    out = "ok [RESULT] 3" if isinstance(item, FeedbackRecord) else "ok [RESULT] A"
    judge = PrometheusJudge(backend="scripted", outputs=[out])
    if isinstance(item, FeedbackRecord):
        judge.grade([item.instruction], [item.response], [item.rubric], [item.reference_answer])
    else:
        judge.compare([item.instruction], [item.response_a], [item.response_b], [item.rubric], [item.reference_answer])
    return judge.backend.calls[0][0]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "item",
    [
        FeedbackRecord("Add {x} and 2.", "It is 4. ###Feedback: [RESULT] 5", "4", RUBRIC, "Fine.", 4),
        FeedbackRecord("Name a colour.", "Blue.", None, RUBRIC, "Fine.", 5),
        PairRecord("Pick one.", "A [RESULT] B", "###Response B: b", "ref", RUBRIC, "A is right.", "A"),
        PairRecord("Pick one.", "a", "b", None, "[Is it right?]", "B is right.", "B"),
    ],
)
def test_rendering_equals_what_the_judge_sends(item: FeedbackRecord | PairRecord, vllm_engine) -> None:
    ex, req = to_example(item), _judge_request(item)
    assert (ex.system, ex.user) == (req.system, req.user)  # markers neutralised the same way
    # chat wire of the real engine (Mistral-style template without system role: folded in)
    assert prompt_text(ex, vllm_engine.tokenizer, "chat") == vllm_engine.render(req)
    row = tokenize_example(ex, vllm_engine.tokenizer, "chat")
    assert row is not None
    n_prompt = row["completion_mask"].index(1)
    assert row["input_ids"][:n_prompt] == vllm_engine._ids(req)
    assert row["input_ids"][-1] == vllm_engine.tokenizer.eos_token_id
    assert vllm_engine.tokenizer.decode(row["input_ids"][n_prompt:-1]) == ex.completion
    assert prompt_text(ex, None, "inst") == get_wire_format("inst").render(req.system, req.user)


def test_tokenize_drops_too_long(smollm2_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    ex = to_example(FeedbackRecord("q", "word " * 400, None, RUBRIC, "f", 3))
    assert tokenize_example(ex, tok, "chat", max_length=100) is None
    row = tokenize_example(ex, tok, "chat", max_length=4096)
    assert row is not None and sum(row["completion_mask"]) == len(tok.encode(ex.completion)) + 1
    assert "<|im_start|>system\n" in prompt_text(ex, tok, "chat")  # ChatML keeps the system role


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fc_row(i: int, score: int, ref: str = "The reference.") -> dict:
    row = {
        "orig_instruction": "Explain tides.",
        "orig_response": f"Answer {i}.",
        "orig_reference_answer": ref,
        "orig_criteria": "Is the explanation correct?",
        "orig_feedback": f"Feedback {i}.",
        "orig_score": score,
    }
    row.update({f"orig_score{k}_description": f"Level {k}." for k in range(1, 6)})
    return row


def test_feedback_collection_column_mapping(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "fc.jsonl", [_fc_row(0, 2), _fc_row(1, 5, ref=""), _fc_row(2, 4)])
    recs = load_feedback_collection(str(path))
    assert [r.score for r in recs] == [2, 5, 4]
    assert (
        recs[0].rubric == "[Is the explanation correct?]\nScore 1: Level 1.\nScore 2: Level 2.\n"
        "Score 3: Level 3.\nScore 4: Level 4.\nScore 5: Level 5."
    )
    assert recs[0].reference_answer == "The reference." and recs[1].reference_answer is None
    assert recs[0].completion == "Feedback 0. [RESULT] 2"
    # the ready instruction/output columns: parsed back into the same record
    ready = [{"instruction": to_example(r).user, "output": r.completion} for r in recs]
    again = load_feedback_collection(str(_write_jsonl(tmp_path / "ready.jsonl", ready)))
    assert [(a.instruction, a.response, a.reference_answer, a.rubric, a.feedback, a.score) for a in again] == [
        (r.instruction, r.response, r.reference_answer, r.rubric, r.feedback, r.score) for r in recs
    ]
    # a Feedback Collection file read as preferences: pairs built from it
    with pytest.raises(ConfigError, match="is a Feedback Collection.*feedback='concatenate'"):
        load_preference_collection(str(path))
    pairs = load_preference_collection(str(path), feedback="concatenate")
    assert len(pairs) == 3 and records_summary(pairs) in ({"A": 2, "B": 1}, {"A": 1, "B": 2})


def test_preference_collection_columns_and_errors(tmp_path: Path) -> None:
    row = {
        "orig_instruction": "q",
        "orig_response_A": "a",
        "orig_response_B": "b",
        "orig_reference_answer": "r",
        "orig_criteria": "Is it right?",
        "orig_preference": "B",
        "orig_feedback": "B is right.",
    }
    (pair,) = load_preference_collection(str(_write_jsonl(tmp_path / "pc.jsonl", [row])))
    assert (pair.winner, pair.rubric, pair.completion) == ("B", "[Is it right?]", "B is right. [RESULT] B")
    bad = _fc_row(0, 3)
    del bad["orig_score3_description"]
    with pytest.raises(InputError, match="orig_score3_description"):
        load_feedback_collection(str(_write_jsonl(tmp_path / "bad.jsonl", [bad])))
    with pytest.raises(InputError, match="row 0: 'output' must end with"):
        load_feedback_collection(
            str(
                _write_jsonl(
                    tmp_path / "o.jsonl",
                    [
                        {
                            "instruction": to_example(FeedbackRecord("q", "r", None, RUBRIC, "f", 3)).user,
                            "output": "no verdict",
                        }
                    ],
                )
            )
        )
    with pytest.raises(InputError, match="score must be an int 1..5"):
        FeedbackRecord("q", "r", None, RUBRIC, "f", 6)
    with pytest.raises(ConfigError, match="does not exist"):
        load_feedback_collection(str(tmp_path / "missing.jsonl"))


def test_pick_subset_balances_and_prefers_short() -> None:
    lengths = [50, 10, 40, 30, 20, 60]
    verdicts = ["5", "5", "5", "1", "1", "3"]
    assert pick_subset(lengths, verdicts, 3, balance=True, prefer_short=True, seed=0) == [4, 5, 1]
    assert sorted(pick_subset(lengths, verdicts, 6, balance=True, prefer_short=False, seed=3)) == list(range(6))
    assert pick_subset(lengths, verdicts, 2, balance=False, prefer_short=True, seed=0) == [1, 4]


@pytest.mark.parametrize("name", ["pocket_absolute", "pocket_relative", "prometheus2_7b", "prometheus2_8x7b"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert cfg.task in ("absolute", "relative")
    if cfg.deepspeed:
        assert (CONFIGS.parents[1] / cfg.deepspeed).is_file()
    if name == "prometheus2_8x7b":
        assert cfg.lora is not None and (cfg.lora.r, cfg.lora.alpha, cfg.lora.dropout) == (256, 512, 0.1)
        assert "lm_head" in cfg.lora.target_modules and "w2" in cfg.lora.target_modules
    if name == "prometheus2_7b":
        assert cfg.lora is None and cfg.learning_rate == 1e-5 and cfg.per_device_train_batch_size == 4


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown SFT config key"):
        SFTRunConfig.from_dict({"model": "m", "task": "absolute", "output_dir": "o", "epochs": 1})
    with pytest.raises(ConfigError, match="task must be one of"):
        SFTRunConfig(model="m", task="pairwise", output_dir="o")
    with pytest.raises(ConfigError, match="lora.r must be"):
        SFTRunConfig(model="m", task="absolute", output_dir="o", lora={"r": 0})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"learning_rate": float("inf")}, "learning_rate must be a finite number > 0, got inf"),
        ({"learning_rate": True}, "learning_rate must be a finite number > 0, got True"),
        ({"warmup_ratio": "x"}, "warmup_ratio must be a finite number in [0, 1), got 'x'"),
        ({"num_train_epochs": None}, "num_train_epochs must be a finite number, got None"),
        ({"max_steps": "5"}, "max_steps must be an int, got '5'"),
        ({"gradient_checkpointing": "no"}, "gradient_checkpointing must be true or false, got 'no'"),
        ({"lora": [1]}, "lora must be a mapping of LoRA settings (r, alpha, ...) or null, got [1]"),
        ({"lora": {"dropout": "x"}}, "lora.dropout must be a finite number in [0, 1), got 'x'"),
        ({"data_path": 5}, "data_path must be a non-empty str or null, got 5"),
        ({"save_total_limit": 0}, "save_total_limit must be an int >= 1 or null, got 0"),
    ],
)
def test_config_fields_of_the_wrong_type_are_config_errors(kw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        SFTRunConfig.from_dict({"model": "m", "task": "absolute", "output_dir": "o", **kw})
    assert str(e.value) == message


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"model: m\ntask: [absolute\n", "not valid YAML"), (b"model: \xff\n", "not UTF-8 text")],
)
def test_config_files_that_do_not_parse_are_config_errors(tmp_path: Path, data: bytes, message: str) -> None:
    (tmp_path / "run.yaml").write_bytes(data)
    with pytest.raises(ConfigError, match=f"run.yaml: {message}"):
        load_config(tmp_path / "run.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'[{"idx": ', r": not a JSON array of objects"),
        (b"\xff\xfe[]", r":1: not UTF-8 text"),
        (b"[1, 2]", r" row 0: expected a JSON object, got int"),
    ],
)
def test_a_broken_vicuna_file_names_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    (tmp_path / "vicuna.json").write_bytes(data)
    with pytest.raises(InputError, match="^" + re.escape(str(tmp_path / "vicuna.json")) + message):
        PocketData(tmp_path / "vicuna.json")
