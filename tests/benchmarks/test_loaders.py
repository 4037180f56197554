"""benchmarks.loaders: the benchmark files shipped in benchmarks/data and the published layouts."""

import json

import pytest

from benchmarks.loaders import (
    BENCHES,
    DATA_DIR,
    AbsoluteExample,
    PairExample,
    load_bench,
    parse_autoj_records,
    parse_chosen_rejected_records,
    subset,
)
from prom_reward.errors import InputError, UnknownNameError
from prom_reward.format.render import render_absolute


def test_named_benches_resolve_in_the_repository(data_dir):
    assert DATA_DIR == data_dir and (DATA_DIR / "vicuna_eval.json").is_file()


def test_vicuna_loads_all_records_with_mean_reference(data_dir):
    layout, ex = load_bench("vicuna")
    assert layout == "absolute" and len(ex) == 320
    assert all(isinstance(e, AbsoluteExample) and e.reference_answer for e in ex)
    assert len({e.group for e in ex}) == 80 and len({e.id for e in ex}) == 320
    raw = json.loads((data_dir / "vicuna_eval.json").read_text())
    assert ex[5].reference_score == pytest.approx(sum(raw[5]["gpt4_score"]) / 3)
    assert ex[5].response in raw[5]["instruction"] and ex[5].rubric.startswith("[")


def test_autoj_labels_and_scenarios():
    layout, ex = load_bench("autoj")
    assert layout == "autoj" and len(ex) == 1392
    labels = [e.label for e in ex]
    assert (labels.count("1"), labels.count("2"), labels.count("tie")) == (520, 499, 373)
    assert len({e.category for e in ex}) == 58
    assert "Score 5:" in ex[0].rubric  # Direct2Pair needs a full rubric


def test_chosen_rejected_layout_and_tie():
    def rec(c, r, **kw):
        return {
            "chosen_instruction": render_absolute("q", c, "harmlessness"),
            "rejected_instruction": render_absolute("q", r, "harmlessness"),
            **kw,
        }

    ex = parse_chosen_rejected_records([rec("good", "bad", source="harmless"), rec("x", "y", tie=1)])
    assert [(e.response_1, e.response_2, e.label, e.category) for e in ex] == [
        ("good", "bad", "1", "harmless"),
        ("x", "y", "tie", "all"),
    ]
    mismatched = {
        "chosen_instruction": render_absolute("q1", "a", "honesty"),
        "rejected_instruction": render_absolute("q2", "b", "honesty"),
    }
    with pytest.raises(InputError, match="record 0: chosen and rejected prompts differ"):
        parse_chosen_rejected_records([mismatched])


@pytest.mark.parametrize(
    "record, message",
    [
        ({"prompt": "q", "response 1": "a", "response 2": "b", "label": 7}, "label must be 0, 1 or 2"),
        ({"prompt": "q", "response 1": "a", "label": 0}, "missing field 'response 2'"),
        ("not a dict", "expected a JSON object"),
    ],
)
def test_autoj_bad_records(record, message):
    with pytest.raises(InputError, match=message):
        parse_autoj_records([record])


def test_unknown_bench_and_missing_layout(tmp_path):
    with pytest.raises(InputError, match="neither a known name"):
        load_bench("nope")
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps({"prompt": "q", "response 1": "a", "response 2": "b", "label": 2}) + "\n")
    with pytest.raises(InputError, match="needs layout="):
        load_bench(str(f))
    assert load_bench(str(f), layout="autoj")[1][0].label == "tie"
    with pytest.raises(UnknownNameError, match="valid names: absolute, autoj, chosen_rejected"):
        load_bench(str(f), layout="nope")
    assert "hhh" in BENCHES and "preference_bench" in BENCHES


def test_named_bench_not_shipped_says_where():
    with pytest.raises(InputError, match="hhh_alignment_eval.json, which is not shipped"):
        load_bench("hhh")


def test_subset_keeps_groups_and_is_reproducible():
    _, ex = load_bench("vicuna")
    a, b = subset(ex, 8, seed=3), subset(ex, 8, seed=3)
    assert [e.id for e in a] == [e.id for e in b] and len(a) == 8
    assert len({e.group for e in a}) == 2  # two whole instructions of four responses
    assert subset(ex, None) == ex
    pairs = [PairExample(str(i), "q", "a", "b", "1", "[r]") for i in range(10)]
    assert len(subset(pairs, 4, seed=0)) == 4 and subset(pairs, 4, 0) != subset(pairs, 4, 1)
