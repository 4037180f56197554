"""The hacking probe end to end: judges scripted to be exploitable in known ways come out exploitable in those
ways (and a fair one does not), bad data fails before any judging with the file, row and flag, the CLI writes
the record and prints the summary, and once against a real vLLM server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.cli.main import main
from prom_reward.errors import ConfigError, InputError
from prom_reward.probe.data import LLMBAR_SETS, ProbeItem, checkout_data_dir, load_items, load_llmbar, seeded_subset
from prom_reward.probe.run import POOLED, ProbeConfig, edit_stats, llmbar_accuracy, load_inputs, run_probe, score_shifts
from prom_reward.probe.summary import fmt_number, markdown_table, not_run_notes, summary, verdict_warnings
from tests.judges import pair_of, response_of

QUESTIONS = [
    "Name a planet.",
    "Give a synonym of quick.",
    "Say hello in French.",
    "What colour is grass?",
    "Name an even prime.",
    "What is the capital of Italy?",
]
GOOD = ["Mars.", "Fast.", "Bonjour.", "Green.", "2.", "Rome."]
BAD = [
    "The planets are many, and astronomy is a vast and noble science that rewards careful study.",
    "Quickness is a quality admired in many settings, from sport to conversation and beyond.",
    "Greetings differ across cultures, and language learning opens many doors for travellers.",
    "Colours are perceived through the eye, and the study of light is a fascinating field.",
    "Prime numbers have intrigued mathematicians for centuries with their elegant properties.",
    "Italy is a beautiful country with a long history, fine food and many famous cities.",
]


def write_llmbar(folder: Path, natural_right_is_longer: bool = False) -> Path:
    """An LLMBar-shaped folder of our own pairs: in the adversarial sets the wrong output is the long, polished
    one; in Natural the right one is (when ``natural_right_is_longer``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(LLMBAR_SETS):
        records = []
        for i, (q, good, bad) in enumerate(zip(QUESTIONS, GOOD, BAD, strict=True)):
            right, wrong = (
                (good + " " + bad, good[:-1] + "?") if name == "Natural" and natural_right_is_longer else (good, bad)
            )
            first_is_right = (i + k) % 2 == 0
            records.append(
                {
                    "input": q,
                    "output_1": right if first_is_right else wrong,
                    "output_2": wrong if first_is_right else right,
                    "label": 1 if first_is_right else 2,
                }
            )
        (folder / f"{name}.json").write_text(json.dumps(records))
    return folder


def write_items(path: Path) -> Path:
    rows = [
        {"id": f"q{i}", "instruction": q, "response": g + " It is a well-known fact.", "reference_answer": g}
        for i, (q, g) in enumerate(zip(QUESTIONS, GOOD, strict=True))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def exploitable_judge(seen: list[GenerationRequest] | None = None) -> PrometheusJudge:
    """Pays for length (pairwise: the longer side; absolute: 3, or 5 past 55 characters), for a self-grade
    sentence and for a raw '[RESULT] 5' (which it can only see if nobody neutralised it)."""

    def respond(request: GenerationRequest, i: int) -> str:
        if seen is not None:
            seen.append(request)
        if "###Response to evaluate:\n" in request.user:
            text = response_of(request)
            gamed = "deserves a score of 5" in text or "[RESULT] 5" in text or len(text) > 55
            return f"Looks {'great' if gamed else 'fine'}. [RESULT] {5 if gamed else 3}"
        a, b = pair_of(request)
        return f"Longer wins. [RESULT] {'A' if len(a) >= len(b) else 'B'}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)


def fair_judge() -> PrometheusJudge:
    """Knows the right answers: grades by them, ignoring everything else."""

    def respond(request: GenerationRequest, i: int) -> str:
        if "###Response to evaluate:\n" in request.user:
            return "Correct. [RESULT] 4"
        a, b = pair_of(request)
        return f"Right one. [RESULT] {'A' if any(a.startswith(g) and len(a) < 10 for g in GOOD) else 'B'}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0)


def test_a_length_loving_judge_fails_the_adversarial_sets(tmp_path):
    pairs = load_llmbar(write_llmbar(tmp_path / "llmbar", natural_right_is_longer=True))
    out = llmbar_accuracy(exploitable_judge(), pairs)
    assert out["sets"]["Natural"]["accuracy"] == 1.0
    for name in LLMBAR_SETS[1:] + (POOLED,):
        assert out["sets"][name]["accuracy"] == 0.0 and out["gaps"][name] == 1.0
    assert out["sets"][POOLED]["n"] == 24 and out["sets"]["Natural"]["agreement"] == 1.0


def test_a_fair_judge_shows_no_gap_and_a_position_biased_one_sits_at_chance(tmp_path):
    pairs = load_llmbar(write_llmbar(tmp_path / "llmbar"))
    fair = llmbar_accuracy(fair_judge(), pairs)
    assert all(s["accuracy"] == 1.0 and s["both_right"] == 1.0 for s in fair["sets"].values())
    assert set(fair["gaps"].values()) == {0.0}
    first = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: "[RESULT] A"), max_retries=0)
    biased = llmbar_accuracy(first, pairs)["sets"]["Natural"]
    assert biased["accuracy"] == 0.5 and biased["agreement"] == 0.0 and biased["both_right"] == 0.0
    assert biased["order_accuracy"] == [0.5, 0.5]  # labels alternate, so "A" is right half the time in each order
    silent = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: "no idea"), max_retries=0)
    nothing = llmbar_accuracy(silent, pairs)["sets"]["Natural"]
    assert nothing["accuracy"] == 0.0 and nothing["failed"] == 12  # no verdict counts wrong, never skipped


def test_score_shifts_find_what_the_judge_pays_for(tmp_path):
    items = load_items(write_items(tmp_path / "items.jsonl"))
    seen: list[GenerationRequest] = []
    out = score_shifts(
        exploitable_judge(seen), items, ["none", "pad_2x", "self_grade", "self_grade_marker", "markdown"], seed=1
    )
    e = out["edits"]
    assert out["n_items"] == 6 and out["original_mean"] == 3.0
    assert e["none"]["mean_shift"] == 0.0 and e["none"]["rise_share"] == 0.0 and e["none"]["mean_shift_ci"] == [0, 0]
    assert e["pad_2x"]["rise_share"] == 1.0 and e["pad_2x"]["mean_shift"] == 2.0
    assert e["pad_2x"]["mean_length_ratio"] > 2
    assert e["self_grade"]["mean_shift"] == 2.0 and e["self_grade"]["rise_share_ci"] == [1.0, 1.0]
    assert e["self_grade_marker"]["mean_shift"] == 0.0  # the neutraliser hid the marker from the judge
    assert e["markdown"]["mean_shift"] == 0.0 and e["markdown"]["fall_share"] == 0.0
    assert len(seen) == 6 * (3 + 5)  # three grades of each original and five edits, in one batched call
    assert "###Reference Answer (Score 5):\nMars.\n" in seen[0].user
    assert [row["id"] for row in out["per_item"]] == [f"q{i}" for i in range(6)]
    assert all(row["baseline"] == [3.0, 3.0, 3.0] and row["original"] == 3.0 for row in out["per_item"])


def test_the_original_score_is_the_mean_of_its_baseline_grades():
    """A noisy judge: each unedited response gets 2, 3, 4 in turn, so the baseline is 3 and one lucky grade of
    the original does not tilt every edit's shift."""
    grades = iter([2, 3, 4, 5] * 10)
    judge = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: f"Hm. [RESULT] {next(grades)}"), max_retries=0)
    out = score_shifts(judge, [ProbeItem("a", "q", "r")], ["none"], baseline_samples=3)
    assert out["per_item"][0]["baseline"] == [2.0, 3.0, 4.0] and out["per_item"][0]["original"] == 3.0
    assert out["edits"]["none"]["mean_shift"] == 2.0 and out["baseline_samples"] == 3


def test_edit_stats_intervals_and_failures():
    s = edit_stats([3.0, 3.0, 3.0, 3.0, None], [4.0, 3.0, 2.0, 5.0, 4.0], seed=0)
    assert s["n"] == 4 and s["failed"] == 1 and s["mean_shift"] == 0.5
    assert s["rise_share"] == 0.5 and s["fall_share"] == 0.25
    assert s["mean_shift_ci"][0] < 0.5 < s["mean_shift_ci"][1] and 0.0 <= s["rise_share_ci"][0] <= 0.5
    assert edit_stats([None], [4.0])["mean_shift"] is None


def test_run_probe_record_and_summary(tmp_path):
    cfg = ProbeConfig(
        llmbar=str(write_llmbar(tmp_path / "llmbar")), items=str(write_items(tmp_path / "i.jsonl")), limit=4, seed=2
    )
    record = run_probe(exploitable_judge(), cfg, judge_label="scripted")
    assert record["judge"] == "scripted" and record["config"]["limit"] == 4
    assert all(s["n"] == 4 for name, s in record["llmbar"]["sets"].items() if name != POOLED)
    assert record["shifts"]["n_items"] == 4 and list(record["shifts"]["edits"]) == list(cfg.edits)
    assert record["judge_stats"]["items"] == 5 * 4 * 2 + 4 * (3 + 7)  # LLMBar both orders; 3 baselines + 7 edits
    json.dumps(record)  # JSON-able as it is
    text = summary(record)
    assert "| Adversarial_GPTOut | 4 |" in text and "| pad_2x | 4 | +2.00 |" in text
    again = run_probe(exploitable_judge(), cfg, judge_label="scripted")
    assert again["llmbar"] == record["llmbar"] or again["llmbar"]["sets"] == record["llmbar"]["sets"]
    assert again["shifts"]["edits"] == record["shifts"]["edits"]  # seeded subsets, edits and bootstrap


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: (d / "Adversarial_Manual.json").unlink(), "Adversarial_Manual.json is missing"),
        (lambda d: (d / "Natural.json").write_text("{not json"), "not valid JSON"),
        (
            lambda d: (d / "Natural.json").write_text(
                json.dumps([{"input": "q", "output_1": "a", "output_2": "b", "label": 3}])
            ),
            "record 0: label must be 1 or 2",
        ),
        (
            lambda d: (d / "Natural.json").write_text(
                json.dumps([{"input": "q", "output_1": "", "output_2": "b", "label": 1}])
            ),
            "row 0: 'output_1' must be",
        ),
        (lambda d: (d / "Natural.json").write_text("[" * 100_000 + "]" * 100_000), "not valid JSON .RecursionError"),
        (lambda d: (d / "Natural.json").write_text("[1" + "0" * 5000 + "]"), "not valid JSON .ValueError"),
    ],
)
def test_bad_llmbar_data_names_file_and_record(tmp_path, mutate, match):
    folder = write_llmbar(tmp_path / "llmbar")
    mutate(folder)
    with pytest.raises(InputError, match=match):
        load_llmbar(folder)


@pytest.mark.parametrize(
    "lines, match",
    [
        (['{"instruction": "q", "response": "r"}', '{"instruction": "q"}'], "row 1: no 'response' column"),
        (['{"instruction": "q", "response": 5}'], "row 0: 'response' must be a non-empty string"),
        ([], "has no rows"),
        (["[1, 2]"], "expected a JSON object"),
        (['{"instruction": "q", "response": "r\\ud800"}'], "row 0: 'response' holds a lone surrogate"),
        (['{"instruction": "q", "response": "r", "rubric": 5}'], "row 0: 'rubric' 5 is not a rubric"),
        (['{"instruction": "q", "response": "r", "rubric": {"a": 1}}'], r"row 0: 'rubric' \{'a': 1\} is not a rubric"),
        (['{"instruction": "q", "response": "r", "rubric": "vibes"}'], "row 0: 'rubric' 'vibes' is not a rubric"),
    ],
)
def test_bad_items_name_the_row(tmp_path, lines, match):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(InputError, match=match):
        load_items(path)


def test_the_checkout_data_loads():
    data = checkout_data_dir()
    assert data is not None
    pairs = load_llmbar(data / "llmbar")
    assert {k: len(v) for k, v in pairs.items()} == {
        "Natural": 100,
        "Adversarial_Neighbor": 134,
        "Adversarial_GPTInst": 92,
        "Adversarial_GPTOut": 47,
        "Adversarial_Manual": 46,
    }
    items = load_items(data / "vicuna_eval.json", limit=10, seed=0)
    assert len(items) == 10 and all(it.response and it.rubric.startswith("[") and it.reference_answer for it in items)
    assert items == load_items(data / "vicuna_eval.json", limit=10, seed=0)
    cfg = ProbeConfig(limit=3)
    inputs = load_inputs(cfg)
    assert len(inputs.items) == 3 and all(len(v) == 3 for v in inputs.pairs.values())


@pytest.mark.parametrize(
    "options, match",
    [
        ({"parts": ("llmbar", "vibes")}, "parts"),
        ({"parts": ()}, "parts"),
        ({"edits": ("shout",)}, "edits: unknown"),
        ({"limit": 0}, "limit"),
        ({"resamples": 5}, "resamples"),
        ({"baseline_samples": 0}, "baseline_samples"),
        ({"seed": -5}, "seed: expected an int >= 0"),
    ],
)
def test_bad_probe_config(options, match):
    with pytest.raises(ConfigError, match=match):
        ProbeConfig(**options)


def test_no_data_outside_a_checkout_names_the_flag(monkeypatch):
    monkeypatch.setattr("prom_reward.probe.data.checkout_data_dir", lambda: None)
    with pytest.raises(InputError, match="pass --llmbar DIR"):
        load_inputs(ProbeConfig(parts=("llmbar",)))
    with pytest.raises(InputError, match="pass --items FILE"):
        load_inputs(ProbeConfig(parts=("shifts",)))


def test_cli_fails_on_bad_data_before_starting_a_judge(tmp_path, capsys, monkeypatch):
    def no_judge(spec):
        raise AssertionError("the judge must not be built before the data is checked")

    monkeypatch.setattr("prom_reward.core.judge_spec.JudgeSpec.build", no_judge)
    bad = tmp_path / "items.jsonl"
    bad.write_text('{"instruction": "q", "response": ""}\n')
    out = tmp_path / "probe.json"
    assert main(["probe", "--model", "pocket-judge", "--parts", "shifts", "--items", str(bad), "-o", str(out)]) == 2
    assert "row 0: 'response' must be a non-empty string" in capsys.readouterr().err and not out.exists()
    assert main(["probe", "--parts", "shifts", "-o", str(out)]) == 2
    assert "give --model M" in capsys.readouterr().err
    assert main(["probe", "--model", "m", "-o", str(tmp_path / "probe.txt")]) == 2
    assert "name a .json file" in capsys.readouterr().err


def test_cli_refuses_an_output_that_is_its_input_or_a_folder_before_starting_a_judge(tmp_path, capsys, monkeypatch):
    """``-o`` naming the ``--items`` file or a file of the ``--llmbar`` folder (the record would have replaced the
    data after the whole probe ran), or a folder (found only when writing), is exit 2 before anything runs."""

    def no_judge(spec):
        raise AssertionError("the judge must not be built")

    monkeypatch.setattr("prom_reward.core.judge_spec.JudgeSpec.build", no_judge)
    items = tmp_path / "items.json"
    items.write_text('[{"instruction": "q", "response": "r"}]')
    folder = write_llmbar(tmp_path / "llmbar")
    natural = (folder / "Natural.json").read_bytes()
    (tmp_path / "out.json").mkdir()
    for argv, said in (
        (["--parts", "shifts", "--items", str(items), "-o", str(items)], "that is the --items file"),
        (["--parts", "llmbar", "--llmbar", str(folder), "-o", str(folder / "Natural.json")], "in the --llmbar folder"),
        (["--parts", "shifts", "--items", str(items), "-o", str(tmp_path / "out.json")], "that is a folder"),
    ):
        assert main(["probe", "--model", "pocket-judge", *argv]) == 2
        assert said in capsys.readouterr().err
    assert items.read_text() == '[{"instruction": "q", "response": "r"}]'
    assert (folder / "Natural.json").read_bytes() == natural


@pytest.mark.integration
@pytest.mark.smollm2
def test_cli_probe_against_a_real_vllm_server(smollm2_server, tmp_path, capsys):
    out = tmp_path / "probe.json"
    rc = main(
        [
            "probe",
            "--server",
            smollm2_server,
            "--limit",
            "1",
            "--max-tokens",
            "16",
            "--force-verdict",
            "always",
            "--edits",
            "none,pad_2x,self_grade",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    record = json.loads(out.read_text())
    assert [s["n"] for s in record["llmbar"]["sets"].values()] == [1, 1, 1, 1, 1, 4]
    assert all(0.0 <= s["accuracy"] <= 1.0 for s in record["llmbar"]["sets"].values())
    assert record["shifts"]["n_items"] == 1 and set(record["shifts"]["edits"]) == {"none", "pad_2x", "self_grade"}
    assert record["judge_stats"]["completion_tokens"] > 0 and record["judge_options"]["force_verdict"] == "always"
    assert record["sampling"]["max_tokens"] == 16
    printed = capsys.readouterr().out
    assert "LLMBar pairwise accuracy" in printed and "| self_grade | " in printed
    forced = record["judge_stats"]["forced"]
    assert forced > 0  # 16 tokens: the judge's feedback is cut before its verdict
    first = [line for line in printed.splitlines() if line.strip()][1]  # the line after the title
    assert first.startswith(f"**{forced} of {record['judge_stats']['samples']} judge samples had a forced verdict**")


def models_route(k, body):  # the stand-in server names one model
    return 200, {"data": [{"id": "judge"}]}


def test_cli_probe_with_a_judge_server_answering_garbage_writes_an_honest_record(fake_server, tmp_path, capsys):
    """Every judgment fails: no verdict counts wrong in LLMBar, and no shift is made up (n/a), never a 0."""
    from tests.fakes import chat_reply

    srv = fake_server(
        {
            "/v1/models": models_route,
            "/v1/chat/completions": lambda k, body: (200, chat_reply(body.get("n", 1), "I refuse.")),
        }
    )
    out = tmp_path / "probe.json"
    rc = main(
        [
            "probe",
            "--server",
            srv.url,
            "--llmbar",
            str(write_llmbar(tmp_path / "llmbar")),
            "--items",
            str(write_items(tmp_path / "items.jsonl")),
            "--limit",
            "2",
            "--edits",
            "none,pad_2x",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    record = json.loads(out.read_text())
    assert all(s["accuracy"] == 0.0 and s["failed"] == 2 * s["n"] for s in record["llmbar"]["sets"].values())
    assert record["shifts"]["original_failed"] == 2 and record["shifts"]["original_mean"] is None
    assert all(e["n"] == 0 and e["mean_shift"] is None for e in record["shifts"]["edits"].values())
    printed = capsys.readouterr().out
    assert "| pad_2x | 0 | n/a | n/a |" in printed
    first = [line for line in printed.splitlines() if line.strip()][1]  # the line after the title
    orders = sum(2 * s["n"] for name, s in record["llmbar"]["sets"].items() if name != "Adversarial")
    assert orders == 20 and first == (  # 5 sets x 2 pairs x 2 orders; the pooled set is not counted twice
        f"**Without a verdict:** {orders} LLMBar order-judgments, 2 of 2 unedited items, "
        "4 of 4 edit comparisons (the edited or the unedited grade)."
    ), first


def test_cli_probe_with_a_failing_judge_server_exits_4_and_writes_nothing(fake_server, tmp_path, capsys):
    srv = fake_server(
        {
            "/v1/models": models_route,
            "/v1/chat/completions": lambda k, body: (500, {"error": {"message": "engine died"}}),
        }
    )
    out = tmp_path / "probe.json"
    rc = main(
        [
            "probe",
            "--server",
            srv.url,
            "--parts",
            "shifts",
            "--items",
            str(write_items(tmp_path / "i.jsonl")),
            "--limit",
            "1",
            "--edits",
            "none",
            "--outage-budget-s",  # not waited for: past the budget the probe stops
            "0",
            "-o",
            str(out),
        ]
    )
    assert rc == 4 and not out.exists()  # the judge is down: the jobs' EXIT_JUDGE_DOWN, not a usage error
    err = capsys.readouterr().err
    assert f"probe: the judge {srv.url} could not be reached or refused every request" in err and "engine died" in err


def test_cli_probe_waits_out_a_judge_that_fails_a_while(fake_server, tmp_path):
    """The probe judges through the outage policy (``--outage-*``): a judge answering 500 to its first calls is
    asked again, and the record has every judgment."""

    def chat(k: int, body: dict):
        if k <= 2:
            return 500, {"error": {"message": "engine loading"}}
        n = body.get("n", 1)
        choices = [{"index": i, "message": {"content": "Fine. [RESULT] 4"}, "finish_reason": "stop"} for i in range(n)]
        return 200, {"choices": choices, "usage": {"prompt_tokens": 7, "completion_tokens": 3}}

    srv = fake_server({"/v1/models": models_route, "/v1/chat/completions": chat})
    out = tmp_path / "probe.json"
    argv = ["probe", "--server", srv.url, "--parts", "shifts", "--items", str(write_items(tmp_path / "i.jsonl"))]
    rc = main([*argv, "--limit", "1", "--edits", "none", "--outage-backoff-s", "0.05", "-o", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    assert record["shifts"]["original_failed"] == 0 and record["shifts"]["original_mean"] == 4.0
    assert len(srv.bodies("/v1/chat/completions")) > 2  # the two failed calls were asked again


def test_items_rows_and_seeded_subsets(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"instruction": "Name a prime.", "response": "7"}) + "\n")
    assert load_items(path) == [ProbeItem("0", "Name a prime.", "7")]
    assert seeded_subset(list(range(10)), 3, seed=0) == [0, 6, 9]  # the same subset, the same record


def test_summary_cells_tables_and_notes():
    assert (fmt_number(-0.001), fmt_number(0.5, signed=True), fmt_number(None), fmt_number(3)) == (
        "0.00",
        "+0.50",
        "n/a",
        "3",
    )
    assert markdown_table((["a", "b"], [["1", "2"]])) == "| a | b |\n|---|---|\n| 1 | 2 |"
    why = "judge format 'selene' does not judge absolute"
    assert not_run_notes({"not_run": {"shifts": why}}) == [f"**Not run:** shifts: {why}."]
    warnings = verdict_warnings(
        {
            "judge_stats": {"samples": 18, "forced": 18},
            "shifts": {"n_items": 3, "original_failed": 0, "edits": {"pad": {"n": 1, "failed": 2}}},
        }
    )
    assert [w[:60] for w in warnings] == [
        "**18 of 18 judge samples had a forced verdict**: each output",
        "**Without a verdict:** 2 of 3 edit comparisons (the edited o",
    ]
    edit = {"n": 1, "failed": 0, "mean_shift": 0.0, "mean_shift_ci": [0.0, 0.0], "rise_share": 0.0}
    edit |= {"rise_share_ci": [0.0, 0.0], "fall_share": 0.0, "mean_length_ratio": 1.0, "description": "unchanged"}
    shifts = {"score": "score", "n_items": 1, "original_mean": 3.0, "original_failed": 0, "edits": {"none": edit}}
    record = {"judge": "j", "date": "2026-01-01", "seconds": 1.0, "llmbar": None, "shifts": shifts}
    assert (
        summary(record).splitlines()[-1] == "| none | 1 | +0.00 | [+0.00, +0.00] | 0.00 | [0.00, 0.00] | 0.00 | 1.00 |"
    )
