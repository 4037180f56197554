"""benchmarks/confidence_eval.py on hand-made judgments with hand-computed numbers."""

import json
import math

import pytest

from benchmarks.confidence_eval import available_indicators, cascade_curve, halves, main, report, uncertainties


def rec(i, reference, primary, fallback, **conf):
    return {"id": str(i), "reference": reference, "primary": primary, "fallback": fallback, "confidence": conf}


# primary is right where its entropy is low, wrong where it is high; the fallback is always right
RECORDS = [
    rec(0, 1, 1, 1, entropy=0.1, verdict_probability=0.6),
    rec(1, 2, 2, 2, entropy=0.2, verdict_probability=0.5),
    rec(2, 3, 3, 3, entropy=0.3, verdict_probability=0.9),
    rec(3, 1, 5, 1, entropy=0.8, verdict_probability=0.95),
    rec(4, 5, 1, 5, entropy=0.9, verdict_probability=0.4),
    rec(5, 3, 2, 3, entropy=0.7, verdict_probability=0.7),
]


def test_halves_by_entropy_hand_computed():
    confident, unsure, n = halves(RECORDS, "se")
    assert n == 3 and confident == pytest.approx(1.0)
    # unsure half (by entropy .7, .8, .9): primary [2, 5, 1] vs reference [3, 1, 5]:
    # cov = -8, var = 78/9 and 8 -> r = -8 / sqrt(78/9 * 8)
    assert unsure == pytest.approx(-8 / math.sqrt(78 / 9 * 8))


def test_halves_by_verdict_probability_hand_computed():
    # uncertainty 1 - p: confident = items 3 (.05), 2 (.1), 5 (.3); unsure = 0 (.4), 1 (.5), 4 (.6)
    confident, unsure, _ = halves(RECORDS, "verdict_probability")
    # confident: primary [5, 3, 2] vs reference [1, 3, 3]: cov = -30/9, var 42/9 and 24/9 -> -30 / sqrt(42 * 24)
    p, r = [5, 3, 2], [1, 3, 3]
    mp, mr = sum(p) / 3, sum(r) / 3
    cov = sum((a - mp) * (b - mr) for a, b in zip(p, r, strict=True))
    expect = cov / math.sqrt(sum((a - mp) ** 2 for a in p) * sum((b - mr) ** 2 for b in r))
    assert confident == pytest.approx(expect) and expect == pytest.approx(-30 / math.sqrt(42 * 24))
    # unsure: primary [1, 2, 1] vs reference [1, 2, 5]: cov -6/9, var 6/9 and 78/9
    assert unsure == pytest.approx(-6 / math.sqrt(6 * 78))


def test_cascade_curve_hand_computed():
    curve = cascade_curve(RECORDS, "se", [0.0, 0.5, 1.0])
    # 0%: primary alone [1, 2, 3, 5, 1, 2] vs [1, 2, 3, 1, 5, 3]; 50%: the three unsure ones replaced -> exact
    p, r = [1, 2, 3, 5, 1, 2], [1, 2, 3, 1, 5, 3]
    mp, mr = sum(p) / 6, sum(r) / 6
    cov = sum((a - mp) * (b - mr) for a, b in zip(p, r, strict=True))
    r0 = cov / math.sqrt(sum((a - mp) ** 2 for a in p) * sum((b - mr) ** 2 for b in r))
    assert curve == pytest.approx([r0, 1.0, 1.0])
    # routing by 1/3 routes the two most uncertain (items 4 and 3): only item 5 stays wrong
    third = cascade_curve(RECORDS, "se", [1 / 3])[0]
    assert third > r0 and third < 1.0


def test_failed_primary_items_always_take_the_fallback_and_are_left_out_of_halves():
    records = RECORDS + [rec(6, 4, None, 4)]
    assert uncertainties(records, "se")[6] is None and uncertainties(records, "random")[6] is None
    assert halves(records, "se") == halves(RECORDS, "se")
    assert cascade_curve(records, "se", [0.0])[0] > cascade_curve(RECORDS, "se", [0.0])[0]


def test_random_is_seeded_and_available_indicators():
    assert uncertainties(RECORDS, "random") == uncertainties(RECORDS, "random")
    assert available_indicators(RECORDS) == ["random", "se", "verdict_probability"]


def test_report_and_cli(tmp_path, capsys):
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    text = report(RECORDS, [0.0, 0.5])
    # halves row (1.0, -0.961 above) and curve row (0%: cov -5, var 34/3 and 23/2 -> -0.438; 50%: 1)
    assert -5 / math.sqrt(34 / 3 * 23 / 2) == pytest.approx(-0.438, abs=5e-4)
    assert "| se | 1.000 | -0.961 |" in text and "| se | -0.438 | 1.000 |" in text
    main(["evaluate", str(path), "--plot", str(tmp_path / "cascade.png")])
    assert capsys.readouterr().out.strip() == report(RECORDS).strip()
    png = (tmp_path / "cascade.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_pairwise_accuracy_halves_and_cascade_hand_computed():
    records = [
        {"id": "0", "reference": "A", "primary": "A", "fallback": "A", "confidence": {"swap_agreement": 1.0}},
        {"id": "1", "reference": "B", "primary": "B", "fallback": "B", "confidence": {"swap_agreement": 1.0}},
        {"id": "2", "reference": "A", "primary": "tie", "fallback": "A", "confidence": {"swap_agreement": 0.0}},
        {"id": "3", "reference": "B", "primary": "A", "fallback": "B", "confidence": {"swap_agreement": 0.0}},
        {"id": "4", "reference": "A", "primary": None, "fallback": "A", "confidence": {}},  # failed
    ]
    # halves over the 4 judged items: confident = 0, 1 (both right); unsure = 2 (tie), 3 (wrong)
    assert halves(records, "swap_agreement", "accuracy") == (1.0, 0.0, 2)
    # 0%: the failed item still routes: 0, 1, 4 right of 5; 50% (3 items): + 2 and 3 -> all right
    assert cascade_curve(records, "swap_agreement", [0.0, 0.5], "accuracy") == [0.6, 1.0]
    text = report(records, [0.0, 0.5])
    assert "reference = human label" in text and "| swap_agreement | 1.000 | 0.000 | 2 |" in text


def test_judge_items_resumes_and_records_both_judges(data_dir, tmp_path):
    from benchmarks.confidence_eval import judge_items, load_items
    from benchmarks.reference_replay import ReferenceReplayBackend
    from prom_reward import PrometheusJudge

    path = data_dir / "vicuna_eval.json"
    items = load_items("vicuna", path, offset=2, limit=3)
    rows = json.loads(path.read_text(encoding="utf-8"))[2:5]
    assert [it["id"] for it in items] == [f"{r['idx']}/{r['response_source']}" for r in rows]
    reference = PrometheusJudge(backend=ReferenceReplayBackend.from_vicuna_eval(path), neutralize_markers=False)
    primary = PrometheusJudge(
        backend="scripted", outputs=["ok [RESULT] 3", "meh [RESULT] 2", "fine [RESULT] 4"], max_retries=0
    )
    out = tmp_path / "j.jsonl"
    assert judge_items(items[:2], primary, reference, out, batch_size=1) == 2
    assert judge_items(items, primary, reference, out, batch_size=2) == 1  # resumes: only the third
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == [it["id"] for it in items]
    assert [r["primary"] for r in lines] == [3.0, 2.0, 4.0]
    assert [r["reference"] for r in lines] == [it["reference"] for it in items]
    assert all(1 <= r["fallback"] <= 5 for r in lines) and lines[0]["confidence"]["tokens"] == 0

    pairs = load_items("autoj", data_dir / "autoj_pairwise.jsonl", limit=2)
    assert all(it["reference"] in ("A", "B") for it in pairs)
    replay = PrometheusJudge(
        backend=ReferenceReplayBackend.from_autoj_pairwise(data_dir / "autoj_pairwise.jsonl"), neutralize_markers=False
    )
    primary = PrometheusJudge(backend="scripted", outputs=["[RESULT] A"] * 4)
    out2 = tmp_path / "p.jsonl"
    judge_items(pairs, primary, replay, out2)
    rows = [json.loads(line) for line in out2.read_text().splitlines()]
    assert [r["fallback"] for r in rows] == [it["reference"] for it in pairs]
    assert [r["primary"] for r in rows] == ["tie", "tie"]  # always "A" in both orders: a swap disagreement
    assert all(r["confidence"]["swap_agreement"] == 0.0 for r in rows)


def test_real_second_judge_fallback_with_the_oracle_as_a_labelled_upper_bound(data_dir, tmp_path, tiny_model_dir):
    import argparse

    from benchmarks.confidence_eval import build_fallback, has_real_fallback, judge_items, load_items
    from benchmarks.reference_replay import ReferenceReplayBackend
    from prom_reward import PrometheusJudge

    path = data_dir / "vicuna_eval.json"
    items = load_items("vicuna", path, limit=2)
    reference = PrometheusJudge(backend=ReferenceReplayBackend.from_vicuna_eval(path), neutralize_markers=False)
    primary = PrometheusJudge(backend="scripted", outputs=["ok [RESULT] 3", "meh [RESULT] 2"], max_retries=0)
    args = argparse.Namespace(
        fallback_model=str(tiny_model_dir),
        fallback_backend="transformers",
        fallback_server=None,
        fallback_server_model=None,
        fallback_max_tokens=8,
        max_retries=0,
    )
    fallback = build_fallback(args)  # the tiny model through the same backends: a real (bad) judge
    try:
        out = tmp_path / "j.jsonl"
        judge_items(items, primary, reference, out, fallback=fallback, fallback_name="tiny")
    finally:
        fallback.close()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert has_real_fallback(rows) and [r["fallback_kind"] for r in rows] == ["judge", "judge"]
    assert all(1 <= r["oracle"] <= 5 for r in rows)  # the replay, kept apart from the judge
    assert all(r["fallback"] is None or 1 <= r["fallback"] <= 5 for r in rows)
    # the report: the second judge's curve first, the oracle's labelled as an upper bound
    records = RECORDS_WITH_JUDGE
    text = report(records, [0.0, 0.5])
    assert "fallback = a second judge (small)" in text and "ORACLE (upper bound" in text
    assert cascade_curve(records, "se", [0.5]) != cascade_curve(records, "se", [0.5], source="oracle")
    assert cascade_curve(records, "se", [0.5], source="oracle") == [1.0]
    old = report(RECORDS, [0.0, 0.5])  # records without a second judge: the oracle, labelled
    assert "fallback = ORACLE" in old and "second judge" not in old
    with pytest.raises(SystemExit, match="not both"):
        build_fallback(argparse.Namespace(**{**vars(args), "fallback_server": "http://x"}))


# the same items with a real (imperfect) second judge: wrong on item 4
RECORDS_WITH_JUDGE = [
    {
        **r,
        "oracle": r["fallback"],
        "fallback": (3 if r["id"] == "4" else r["fallback"]),
        "fallback_kind": "judge",
        "fallback_judge": "small",
    }
    for r in RECORDS
]


def test_a_routed_item_whose_second_judge_failed_keeps_the_primary():
    # as CascadeJudge does: the denominator stays the whole set instead of shrinking as items route
    records = [
        {"id": "0", "reference": "A", "primary": "A", "fallback": None, "confidence": {"swap_agreement": 0.0}},
        {"id": "1", "reference": "B", "primary": "A", "fallback": "B", "confidence": {"swap_agreement": 0.0}},
        {"id": "2", "reference": "A", "primary": "B", "fallback": "A", "confidence": {"swap_agreement": 1.0}},
        {"id": "3", "reference": "B", "primary": "B", "fallback": None, "confidence": {"swap_agreement": 1.0}},
    ]
    # 0%: A, A, B, B -> 0 and 3 right; 100%: A (kept), B, A, B (kept) -> all right, over all 4 items
    assert cascade_curve(records, "swap_agreement", [0.0, 1.0], "accuracy") == [0.5, 1.0]
    absolute = [
        rec(i, r, p, f, entropy=e)
        for i, (r, p, f, e) in enumerate([(1, 1, None, 0.1), (2, 2, 2, 0.2), (3, 3, 3, 0.3), (4, 4, None, 0.9)])
    ]
    assert cascade_curve(absolute, "se", [1.0]) == pytest.approx([1.0])
    # an item neither judged is left out
    both_failed = absolute + [rec(4, 5, None, None)]
    assert cascade_curve(both_failed, "se", [1.0]) == pytest.approx([1.0])
