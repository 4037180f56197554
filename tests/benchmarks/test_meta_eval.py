"""benchmarks.meta_eval: the run record, pairwise protocols, resume from the store, the CLI, and one
real vLLM run on the shared benchmarks (tiny model)."""

import json
import re

import pytest

from benchmarks.meta_eval import MetaEvalConfig, main, run_meta_eval
from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import ConfigError
from prom_reward.format.render import render_absolute
from tests.judges import judge_by_rank

QUALITY = {"great": 5, "good": 4, "fine": 3, "poor": 2, "awful": 1}


def oracle(**options):
    """Grades by the word in the response (no verdict for 'garbled'); picks the better of A/B, A when equal."""
    return judge_by_rank(QUALITY, tie="A", **options)


def abs_records(words_scores):
    return [
        {
            "instruction": render_absolute(f"q{i // 2}", w, "helpfulness"),
            "gpt4_score": s,
            "category": c,
            "idx": i // 2,
            "response_source": f"m{i}",
        }
        for i, (w, s, c) in enumerate(words_scores)
    ]


def test_absolute_record_metrics_and_failures():
    recs = abs_records(
        [
            ("great", [5, 5, 4], "x"),
            ("poor", [2, 1, 2], "x"),
            ("fine", [3, 3, 3], "y"),
            ("good", [4, 4, 5], "y"),
            ("garbled", [1, 1, 1], "y"),
        ]
    )
    judge = oracle(max_retries=0)
    rec = run_meta_eval(judge, recs, layout="absolute", config=MetaEvalConfig(samples=2), bench_name="toy")
    m = rec["metrics"]
    assert rec["n_items"] == 5 and len(rec["predictions"]) == 5 and rec["kind"] == "absolute"
    assert (m["n"], m["dropped"]) == (4, 1)  # the garbled item has no score and is left out
    assert m["samples"] == 10 and m["parse_failures"] == 2 and m["failure_rate"] == pytest.approx(0.2)
    assert m["spearman"] == pytest.approx(1.0) and m["krippendorff_alpha"] == pytest.approx(1.0)
    assert m["per_category"]["x"]["n"] == 2 and m["per_category"]["y"]["dropped"] == 1
    assert sum(map(sum, m["confusion"])) == 4 and m["confusion"][4][4] == 1
    assert rec["predictions"][4]["score"] is None and rec["predictions"][4]["failures"] == 2
    assert rec["judge_stats"]["samples"] == 10 and rec["versions"]["python"]


def pair_records():
    # label 0: response 1 better, 1: response 2 better, 2: tie
    rows = [
        ("great", "poor", 0),
        ("awful", "good", 1),
        ("fine", "fine", 2),
        ("poor", "fine", 1),
        ("good", "good", 2),
        ("great", "awful", 0),
    ]
    return [
        {"prompt": f"q{i}", "response 1": a, "response 2": b, "label": lab, "scenario": "s" + str(i % 2)}
        for i, (a, b, lab) in enumerate(rows)
    ]


def test_pairwise_protocols_with_a_perfect_judge():
    judge = oracle(max_retries=2)
    rec = run_meta_eval(judge, pair_records(), layout="autoj", config=MetaEvalConfig(seed=1), bench_name="pairs")
    d, p = rec["metrics"]["direct"], rec["metrics"]["pair"]
    assert rec["metrics"]["tie_labels"] == 2
    # Direct2Pair: non-tie pairs decided correctly; tie pairs get equal grades (a tie) -> right in w/ tie too
    assert d["acc_wo_tie"] == 1.0 and d["acc_w_tie"] == 1.0 and d["tie_left_rate"] == pytest.approx(2 / 6)
    # Pair2Pair never says tie: tie pairs count wrong in "w/ tie", as in the paper
    assert p["acc_wo_tie"] == 1.0 and p["acc_w_tie"] == pytest.approx(4 / 6)
    # the oracle prefers A on equal responses, so the two orders disagree exactly on the tie pairs
    assert p["swap_consistency"] == pytest.approx(4 / 6) and p["acc_w_tie_swap"] == 1.0
    switched = [x["switched"] for x in rec["predictions"]]
    assert any(switched) and not all(switched)  # the seeded coin flip placed some pairs each way
    assert all(x["label"] == "tie" or x["pair"]["first_order"] == x["label"] for x in rec["predictions"])
    assert set(d["per_category_acc_wo_tie"]) == {"s0", "s1"}


def test_resume_answers_from_the_store(tmp_path):
    store = tmp_path / "j.sqlite"
    cfg = MetaEvalConfig(modes=("direct",), batch_size=2)
    first = run_meta_eval(oracle(store=store), pair_records(), layout="autoj", config=cfg)

    def fail(req, i):
        raise AssertionError("the store should have answered")

    again = run_meta_eval(
        PrometheusJudge(backend="scripted", respond=fail, store=store), pair_records(), layout="autoj", config=cfg
    )
    assert again["metrics"] == first["metrics"] and again["store"]["misses"] == 0 and again["store"]["hits"] > 0


def test_config_validation():
    with pytest.raises(ConfigError, match="modes must be a non-empty subset"):
        MetaEvalConfig(modes=("pairwise",))
    with pytest.raises(ConfigError, match="samples must be"):
        MetaEvalConfig(samples=0)
    with pytest.raises(ConfigError, match="need layout="):
        run_meta_eval(PrometheusJudge(backend="scripted", outputs=[]), [{}])


def test_cli_writes_record_table_predictions_and_plots(tmp_path, capsys):
    bench = tmp_path / "mini.json"
    bench.write_text(json.dumps(abs_records([("great", [5], "a"), ("poor", [2], "a"), ("fine", [3], "b")])))
    cfg = tmp_path / "judge.json"
    cfg.write_text(
        json.dumps({"backend": "scripted", "outputs": ["Fine. [RESULT] 5", "Meh. [RESULT] 2", "Ok. [RESULT] 3"]})
    )
    rc = main(
        [
            "--judge",
            str(cfg),
            "--bench",
            str(bench),
            "--layout",
            "absolute",
            "--samples",
            "1",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    paths = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    record = json.loads(open(paths["record"]).read())
    assert (
        record["bench"] == "mini" and record["judge"] == "judge" and record["metrics"]["pearson"] == pytest.approx(1.0)
    )
    assert len(open(paths["predictions"]).read().splitlines()) == 3
    assert open(paths["confusion"], "rb").read(4) == b"\x89PNG"
    assert re.search(r"\| judge \| mini \| - \| 3 \| pearson \| 1\.000 \|", open(paths["markdown"]).read())


def test_cli_reports_bad_bench(tmp_path, capsys):
    cfg = tmp_path / "judge.json"
    cfg.write_text(json.dumps({"backend": "scripted", "outputs": []}))
    assert main(["--judge", str(cfg), "--bench", "nope"]) == 2
    assert "neither a known name" in capsys.readouterr().err


@pytest.mark.integration
def test_real_engine_on_shipped_benchmarks(vllm_engine):
    judge = PrometheusJudge(backend=vllm_engine, sampling={"max_tokens": 16}, force_verdict="always", max_retries=0)
    rec = run_meta_eval(judge, "vicuna", config=MetaEvalConfig(samples=2, limit=4, transitivity=True))
    m = rec["metrics"]
    assert rec["n_items"] == 4 and m["samples"] == 8 and 0 <= m["failure_rate"] <= 1
    assert m["n"] + m["dropped"] == 4 and m["transitivity"]["pairs"] == 6
    assert all(len(p["outputs"]) == 2 for p in rec["predictions"])
    rec = run_meta_eval(judge, "autoj", config=MetaEvalConfig(limit=4, max_tie_rounds=1))
    for mode in ("direct", "pair"):
        mm = rec["metrics"][mode]
        assert mm["samples"] >= (8 if mode == "direct" else 8) and mm["prompt_tokens"] > 0
        assert mm["acc_w_tie"] is None or 0 <= mm["acc_w_tie"] <= 1
    assert rec["metrics"]["pair"]["swap_pairs"] <= 4
