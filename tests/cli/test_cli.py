"""``prom-reward grade`` end to end against a real vLLM server (and the console script)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prom_reward.cli.main import main
from prom_reward.jobs.io import read_rows

pytestmark = pytest.mark.integration


def write_rows(path, n):
    rows = [{"id": i, "instruction": f"Question {i}?", "response": f"Answer {i}.",
             "reference_answer": "A reference." if i % 2 else None, "rubric": "helpfulness"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_grade_jsonl_via_server_and_resume(tmp_path, vllm_server):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = write_rows(src, 5)
    argv = ["grade", str(src), "-o", str(out), "--server", vllm_server, "--max-tokens", "8",
            "--batch-size", "2", "--quiet"]
    assert main(argv) == 0
    got = list(read_rows(out))
    assert [r["id"] for r in got] == [r["id"] for r in rows]
    for r in got:  # the tiny random model writes no verdicts: None, never a made-up number
        assert r["score"] is None and r["judge_failures"] >= 1 and "probabilities" in r
    # simulate an interrupted run: keep 3 rows, resume, and the rest is appended
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:3]))
    assert main(argv + ["--resume"]) == 0
    assert [r["id"] for r in read_rows(out)] == [0, 1, 2, 3, 4]


def test_grade_parquet_in_and_out(tmp_path, vllm_server):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"instruction": "Say hi", "response": "hi"}, {"instruction": "Count to 2", "response": "1 2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    assert main(["grade", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.parquet"), "--server",
                 vllm_server, "--rubric", "reasoning", "--max-tokens", "4", "--quiet"]) == 0
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [r["instruction"] for r in got] == ["Say hi", "Count to 2"] and all("score" in r for r in got)


def test_missing_column_is_a_clear_error(tmp_path, vllm_server, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"prompt": "x", "response": "y"}) + "\n")
    assert main(["grade", str(src), "-o", str(tmp_path / "o.jsonl"), "--server", vllm_server,
                 "--rubric", "helpfulness", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'instruction' missing" in err and "--instruction-col" in err


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "prom_reward.cli", "grade", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--rubric" in out and "--server" in out
    assert subprocess.run([sys.executable, "-m", "prom_reward.cli", "grade", "x.jsonl", "-o", "y.jsonl"],
                          capture_output=True, text=True).returncode == 2


# --- prom-reward pairs ---------------------------------------------------------------------------

def write_pair_rows(path, n):
    rows = [{"id": i, "prompt": f"Question {i}?", "completions": [f"good {i}", f"bad {i}", f"fair {i}"]}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def scripted_judge(requests_seen):
    from prom_reward import PrometheusJudge
    from prom_reward.backends.scripted import ScriptedBackend

    def respond(req, i):
        requests_seen.append(req.user)
        if "###Response to evaluate:" in req.user:
            body = req.user.split("###Response to evaluate:\n")[1]
            return "Scored. [RESULT] " + ("5" if body.startswith("good") else "3" if body.startswith("fair") else "1")
        a = req.user.split("###Response A:\n")[1]
        a_rank = 2 if a.startswith("good") else 1 if a.startswith("fair") else 0
        b = req.user.split("###Response B:\n")[1]
        b_rank = 2 if b.startswith("good") else 1 if b.startswith("fair") else 0
        return "Compared. [RESULT] " + ("A" if a_rank > b_rank else "B")

    return lambda args: PrometheusJudge(backend=ScriptedBackend(respond=respond), num_samples=args.num_samples)


def test_pairs_command_writes_pairs_stats_and_resumes(tmp_path, monkeypatch, capsys):
    import prom_reward.cli.jobs as cli

    seen: list[str] = []
    monkeypatch.setattr(cli, "build_judge", scripted_judge(seen))
    src, out = tmp_path / "in.jsonl", tmp_path / "pairs.jsonl"
    write_pair_rows(src, 5)
    argv = ["pairs", str(src), "-o", str(out), "--model", "scripted", "--rubric", "helpfulness",
            "--chunk-size", "2", "--keep-col", "id", "--quiet"]
    assert main(argv) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (stats["rows"], stats["pairs"], stats["skipped"]) == (5, 5, {})
    got = list(read_rows(out))
    assert [(r["id"], r["chosen"], r["rejected"], r["margin"]) for r in got][:2] == [
        (0, "good 0", "bad 0", 4.0), (1, "good 1", "bad 1", 4.0)]
    assert len(seen) == 15

    # an interrupted run: the progress file says 2 rows; resuming judges only the other 3
    progress = tmp_path / "pairs.progress.json"
    state = json.loads(progress.read_text())
    state.update(rows_done=2, pair_lines=2, skipped_lines=0)
    progress.write_text(json.dumps(state))
    seen.clear()
    assert main(argv + ["--resume"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (stats["resumed_rows"], stats["judged_rows"], len(seen)) == (2, 3, 9)
    assert list(read_rows(out)) == got

    # all pairs, both orders, with a margin filter that keeps everything (P = 1 -> margin 1)
    seen.clear()
    assert main(["pairs", str(src), "-o", str(tmp_path / "all.jsonl"), "--server", "http://unused", "--rubric",
                 "helpfulness", "--strategy", "all_pairs", "--min-margin", "0.9", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["pairs"] == 15 and len(seen) == 30


def test_pairs_command_reports_bad_input(tmp_path, monkeypatch, capsys):
    import prom_reward.cli.jobs as cli

    seen: list[str] = []
    monkeypatch.setattr(cli, "build_judge", scripted_judge(seen))
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"prompt": "x", "completions": ["only one"]}) + "\n")
    assert main(["pairs", str(src), "-o", str(tmp_path / "o.jsonl"), "--model", "m", "--rubric", "helpfulness",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "row 0" in err and "at least 2 completions" in err and seen == []
    assert main(["pairs", str(src), "-o", str(tmp_path / "o.jsonl"), "--model", "m", "--min-margin", "nan"]) == 2
    assert "min_margin" in capsys.readouterr().err
    assert main(["pairs", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2  # no judge given


def test_pairs_command_against_a_real_server(tmp_path, vllm_server, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "pairs.jsonl"
    write_pair_rows(src, 2)
    assert main(["pairs", str(src), "-o", str(out), "--server", vllm_server, "--rubric", "helpfulness",
                 "--max-tokens", "8", "--force-verdict", "--max-tie-rounds", "1", "--quiet"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the tiny random model's verdicts are noise: check the accounting, not the preferences
    assert stats["rows"] == 2 and stats["pairs"] + sum(stats["skipped"].values()) == 2
    assert len(list(read_rows(out))) == stats["pairs"]
    assert json.loads((tmp_path / "pairs.progress.json").read_text())["rows_done"] == 2


def test_pairs_console_script_help():
    out = subprocess.run([sys.executable, "-m", "prom_reward.cli", "pairs", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--strategy" in out and "--min-margin" in out and "--resume" in out and "--num-samples" in out


# -- a long job streams: memory does not grow with the file ----------------------------------------
PEAK_RSS = """
import resource, runpy, sys
sys.argv = ["prom-reward"] + sys.argv[1:]
try:
    runpy.run_module("prom_reward.cli.main", run_name="__main__")
finally:
    print("peak_rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def test_grade_streams_a_long_file_in_constant_memory(tmp_path):
    """10,000 rows (~45 MB of JSONL) peak at about the same memory as 1,000, against a real HTTP
    no-op judge server (``benchmarks.noop_server``): rows are read, judged and written in batches."""
    from benchmarks.client_overhead import noop_server

    filler = "This response walks through the reasoning step by step and checks the result. " * 56
    peaks, sizes = {}, {}
    with noop_server(None) as url:
        for n in (1000, 10000):
            src, dst = tmp_path / f"in{n}.jsonl", tmp_path / f"out{n}.jsonl"
            with open(src, "w") as f:
                for i in range(n):
                    f.write(json.dumps({"instruction": f"Question {i}?", "response": f"{i}. {filler}"}) + "\n")
            sizes[n] = src.stat().st_size
            out = subprocess.run([sys.executable, "-c", PEAK_RSS, "grade", str(src), "-o", str(dst), "--rubric",
                                  "helpfulness", "--server", url, "--model", "noop-judge", "--batch-size", "500",
                                  "--quiet"], capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, out.stderr[-2000:]
            peaks[n] = int(out.stderr.rsplit("peak_rss_kb", 1)[1].split()[0]) / 1024
            with open(dst) as f:
                scores = [json.loads(line)["score"] for line in f]
            assert len(scores) == n and set(scores) == {4.0}
    grown = peaks[10000] - peaks[1000]
    assert sizes[10000] - sizes[1000] > 35e6
    assert grown < 15, f"peak RSS grew {grown:.1f} MB from 1,000 to 10,000 rows ({peaks})"


def test_reward_server_requires_an_explicit_failure_reward(capsys):
    assert main(["reward-server", "--server", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "failure reward: not set" in err and "--failure-reward / PROM_REWARD_FAILURE_REWARD" in err
    assert "judge_failed=1" in err


def test_reward_server_pairwise_group_requires_group_size(capsys):
    argv = ["reward-server", "--server", "http://127.0.0.1:9/v1", "--failure-reward", "0", "--mode", "pairwise_group"]
    assert main(argv) == 2
    assert "--group-size / PROM_REWARD_GROUP_SIZE" in capsys.readouterr().err


def test_grade_rows_name_the_flag_and_the_row_of_the_input():
    """A renamed, missing column names the option to fix (not a flag made from the column) and the row's
    position in the whole input; a missing rubric names the row too (shared with ``compare``)."""
    from types import SimpleNamespace

    from prom_reward.jobs.grade import grade_rows
    from prom_reward.errors import InputError
    from prom_reward.core.judge import PrometheusJudge

    judge = PrometheusJudge(backend="scripted", outputs=["[RESULT] 3"])
    args = SimpleNamespace(rubric=None, instruction_col="prompt", response_col="response",
                           reference_col="reference_answer", rubric_col="rubric")
    with pytest.raises(InputError, match=r"row 257: column 'prompt' missing .*--instruction-col"):
        grade_rows(judge, [{"prompt": "q", "response": "a"}, {"response": "a"}], args, 256)
    with pytest.raises(InputError, match=r"row 256: no --rubric given and column 'rubric' missing"):
        grade_rows(judge, [{"prompt": "q", "response": "a"}], args, 256)
