"""``make demo`` (``python -m prom_reward.cli.demo``): the default judge is the shipped pocket judge on the
real vLLM engine; it grades the sample rollouts and writes its own verdicts (nothing forced), and the
terminal shows progress lines and the table only (the engine's messages go to the log file).

This is also the suite's end-to-end run of the pocket judge writing ``[RESULT] k`` by itself
(``tests/local/test_pocket_judge.py::test_pocket_judge_writes_the_format_itself``, on dev-split prompts,
is marked ``slow``)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from prom_reward.cli.demo import _progress, load_sample_rollouts, main, pocket_judge_caveat


@pytest.mark.integration  # a real vLLM engine
def test_demo_grades_the_samples_quietly_with_the_pocket_judge(
    capfd: pytest.CaptureFixture[str], smollm2_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "demo.log"
    main(["--log", str(log)])
    out, err = capfd.readouterr()  # what reaches the terminal (file descriptors 1 and 2)
    shown = (out + err).splitlines()
    assert len(shown) <= 60, "\n".join(shown)
    assert not [ln for ln in shown if re.search(r"warn|error|traceback", ln, re.I)], "\n".join(shown)
    assert "starting the judge engine (pocket-judge): done in" in err and "judging 8 rollouts: done in" in err
    rows = load_sample_rollouts()
    assert "judge: pocket-judge" in out
    scored = re.findall(r"^\s*\d+\s+\S+\s+(\d\.\d|None)\s+(\d\.\d\d|-)\s+(\d+)\s", out, flags=re.M)
    assert len(scored) == len(rows)
    assert sum(s != "None" for s, _, _ in scored) >= len(rows) - 1  # at T=1 one may fail after retries
    assert all(forced == "0" for _, _, forced in scored)
    assert re.search(rf"{len(rows)} judgments in [\d.]+s", out) and "forced verdicts 0" in out
    assert out.count("feedback: ") == len(rows) and out.count("feedback: -") <= 1
    # the engine's messages are in the log, and the pocket judge is stored in the dtype it is served in
    text = log.read_text(errors="replace")
    assert f"engine log (vLLM/torch messages): {log}" in out
    assert "vllm" in text.lower() and "Attempted to load weight" not in text
    # after its table the demo says what its judge is, from the pocket judge's own probe record
    caveat = out.split(f"engine log (vLLM/torch messages): {log}")[1]
    assert "at chance on LLMBar's adversarial pairs (accuracy 0.49" in caveat
    assert "--model prometheus-7b-v2.0" in caveat


def test_the_caveat_quotes_the_probe_record_it_names() -> None:
    """The shipped copy of the pocket judge's LLMBar figures agrees with the record in benchmarks/results."""
    import json
    from importlib import resources

    shipped = json.loads(resources.files("prom_reward").joinpath("assets/pocket_judge_probe.json").read_text())
    record = json.loads((Path(__file__).resolve().parents[2] / shipped["record"]).read_text())
    for name, figures in shipped["llmbar"].items():
        s = record["llmbar"]["sets"][name]
        assert (figures["pairs"], figures["accuracy"]) == (s["n"], s["accuracy"])
        assert figures["accuracy_ci"] == s["accuracy_ci"]
    assert shipped["date"] == record["date"][:10] and 0.4 < shipped["llmbar"]["Adversarial"]["accuracy_ci"][1]
    text = pocket_judge_caveat()
    assert "accuracy 0.49, 95% CI 0.43-0.56, 96 pairs; Natural 0.42" in text


def test_help_has_no_doctest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    assert ">>>" not in shown and "Example:" not in shown and "--model" in shown


def test_progress_prints_one_line_each_way_off_a_terminal(tmp_path: Path) -> None:
    with open(tmp_path / "term.txt", "w") as term:
        with _progress(term, "starting") as clock:
            first = clock()
            time.sleep(0.05)
            assert clock() >= first + 0.05  # the seconds since the start, as wall time passes
    lines = (tmp_path / "term.txt").read_text().splitlines()
    assert lines[0] == "starting ..." and re.fullmatch(r"starting: done in \d+\.\ds", lines[1])


def test_a_failed_run_prints_the_log_tail(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine that fails shows the log's tail (a bad option is one error line: tests/cli/test_errors.py)."""
    import prom_reward

    def engine_dies(**options: object) -> None:
        print("engine: out of shared memory", file=sys.stderr)  # what the engine says goes to the log
        raise RuntimeError("engine core died")

    monkeypatch.setattr(prom_reward, "PrometheusJudge", engine_dies)
    log = tmp_path / "demo.log"
    with pytest.raises(RuntimeError, match="engine core died"):
        main(["--log", str(log)])
    err = capfd.readouterr().err
    assert f"the demo failed; the last lines of {log}:" in err and "engine: out of shared memory" in err
