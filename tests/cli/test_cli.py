"""``prom-reward grade`` end to end against a real vLLM server (and the console script)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prom_reward.cli import main as main_module
from prom_reward.cli.main import main
from prom_reward.jobs.source import read_rows

pytestmark = pytest.mark.integration


def write_rows(path, n):
    rows = [
        {
            "id": i,
            "instruction": f"Question {i}?",
            "response": f"Answer {i}.",
            "reference_answer": "A reference." if i % 2 else None,
            "rubric": "helpfulness",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_grade_jsonl_via_server_and_resume(tmp_path, vllm_server, capsys):
    """The real-vLLM end-to-end run of ``grade``: every row once, ``--resume`` rebuilds a damaged output."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = write_rows(src, 5)
    argv = [
        "grade",
        str(src),
        "-o",
        str(out),
        "--server",
        vllm_server,
        "--max-tokens",
        "8",
        "--batch-size",
        "2",
        "--quiet",
    ]
    assert main(argv) == 0
    got = list(read_rows(out))
    assert [r["id"] for r in got] == [r["id"] for r in rows] and [r["source_index"] for r in got] == list(range(5))
    for r in got:  # the tiny random model writes no verdicts: None, never a made-up number, and why
        assert r["score"] is None and r["judge_failures"] >= 1 and r["judge_error"].startswith("no verdict")
    full = out.read_text()
    out.write_text("".join(full.splitlines(keepends=True)[:3]))  # a damaged output: resume rebuilds it
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["rows"], summary["resumed_rows"]) == (0, 5) and out.read_text() == full
    page = tmp_path / "report.html"  # the report on what the real judge wrote: every row, its failures said
    assert main(["report", str(out), "-o", str(page)]) == 0
    html = page.read_text()
    assert "5 rows" in html and "no verdict in" in html


def test_compare_against_a_real_server(tmp_path, vllm_server, capsys):
    """The real-vLLM end-to-end run of ``compare``: both orders per row, no made-up winner."""
    src, out = tmp_path / "ab.jsonl", tmp_path / "verdicts.parquet"
    src.write_text(
        "".join(
            json.dumps({"instruction": f"Q{i}?", "response_a": f"A{i}", "response_b": f"B{i}"}) + "\n" for i in range(3)
        )
    )
    assert (
        main(
            [
                "compare",
                str(src),
                "-o",
                str(out),
                "--server",
                vllm_server,
                "--rubric",
                "helpfulness",
                "--max-tokens",
                "8",
                "--quiet",
            ]
        )
        == 0
    )
    got = list(read_rows(out))
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["source_index"] for r in got] == [0, 1, 2] and summary["prompt_tokens"] > 0
    assert all((r["winner"] is None) == (r["judge_error"] is not None) for r in got)
    assert summary["failed"] + sum(summary["skipped"].values()) == sum(r["winner"] is None for r in got)
    page = tmp_path / "report.html"  # the report on what the real judge wrote: every row
    assert main(["report", str(out), "-o", str(page)]) == 0
    assert "3 rows" in page.read_text()


def _trl(prompt: str, completion: str) -> dict:
    """A row of TRL's conversational prompt-completion data."""
    user, assistant = {"role": "user", "content": prompt}, {"role": "assistant", "content": completion}
    return {"prompt": [user], "completion": [assistant]}


@pytest.mark.parametrize(
    "rows",
    [
        [{"instruction": "Say hi", "response": "hi"}, {"instruction": "Count to 2", "response": "1 2"}],
        [_trl("Say hi", "hi"), _trl("Count to 2", "1 2")],  # TRL's conversational rows, no column flag
    ],
    ids=["our columns", "TRL's columns"],
)
def test_grade_parquet_in_and_out(tmp_path, vllm_server, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    assert (
        main(
            [
                "grade",
                str(tmp_path / "in.parquet"),
                "-o",
                str(tmp_path / "out.parquet"),
                "--server",
                vllm_server,
                "--rubric",
                "reasoning",
                "--max-tokens",
                "4",
                "--quiet",
            ]
        )
        == 0
    )
    got = list(read_rows(tmp_path / "out.parquet"))
    assert [{k: r[k] for k in rows[0]} for r in got] == rows and all("score" in r for r in got)
    assert [r["source_index"] for r in got] == [0, 1] and all(
        r["judge_error"] is None or r["judge_error"].startswith("no verdict") for r in got
    )  # judged: a verdict, or the tiny model's own "no verdict", never a row the job could not read


def test_console_script_help():
    for job in ("grade", "compare", "pairs"):
        out = subprocess.run(
            [sys.executable, "-m", "prom_reward.cli", job, "--help"], capture_output=True, text=True, check=True
        ).stdout
        assert all(
            f in out
            for f in (
                "--rubric",
                "--server",
                "--resume",
                "--overwrite",
                "--batch-size",
                "--store",
                "--store-timeout",
                "--ray",
            )
        )
    done = subprocess.run(
        [sys.executable, "-m", "prom_reward.cli", "grade", "x.jsonl", "-o", "y.jsonl"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "no judge given" in done.stderr


# --- prom-reward pairs ---------------------------------------------------------------------------


def write_pair_rows(path, n):
    rows = [
        {"id": i, "prompt": f"Question {i}?", "completions": [f"good {i}", f"bad {i}", f"fair {i}"]} for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_pairs_command_writes_pairs_and_summary(tmp_path, capsys):
    from tests.jobs.helpers import judge_server

    server = judge_server()
    try:
        src, out = tmp_path / "in.jsonl", tmp_path / "pairs.jsonl"
        write_pair_rows(src, 5)
        argv = [
            "pairs",
            str(src),
            "-o",
            str(out),
            "--server",
            server.url,
            "--model",
            "judge",
            "--rubric",
            "helpfulness",
            "--batch-size",
            "2",
            "--keep-col",
            "id",
            "--quiet",
        ]
        assert main(argv) == 0
        stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert (stats["rows"], stats["pairs"], stats["skipped"]) == (5, 5, {})
        got = list(read_rows(out))
        assert [(r["id"], r["chosen"], r["rejected"], r["margin"]) for r in got][:2] == [
            (0, "good 0", "bad 0", 4.0),
            (1, "good 1", "bad 1", 4.0),
        ]
        assert len(server.bodies("/v1/chat/completions")) == 15 + 1  # and the configuration canary
        # all pairs, both orders, with a margin filter that keeps everything (P = 1 -> margin 1)
        assert (
            main(
                [
                    "pairs",
                    str(src),
                    "-o",
                    str(tmp_path / "all.jsonl"),
                    "--server",
                    server.url,
                    "--model",
                    "judge",
                    "--rubric",
                    "helpfulness",
                    "--strategy",
                    "all_pairs",
                    "--min-margin",
                    "0.9",
                    "--quiet",
                ]
            )
            == 0
        )
        stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert stats["pairs"] == 15 and len(server.bodies("/v1/chat/completions")) == 15 + 30 + 2
    finally:
        server.stop()


def test_pairs_command_reports_bad_input(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"prompt": "x", "completions": "not a list"}) + "\n")
    assert (
        main(
            [
                "pairs",
                str(src),
                "-o",
                str(tmp_path / "o.jsonl"),
                "--server",
                "http://127.0.0.1:9/v1",
                "--rubric",
                "helpfulness",
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "in.jsonl:1: row 0" in err and "completions must be a list of completions, got str" in err
    assert main(["pairs", str(src), "-o", str(tmp_path / "o.jsonl"), "--model", "m", "--min-margin", "nan"]) == 2
    assert "--min-margin: expected a finite number" in capsys.readouterr().err
    assert main(["pairs", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2  # no judge given
    assert not (tmp_path / "o.jsonl").exists()


def test_pairs_command_against_a_real_server(tmp_path, vllm_server, capsys):
    """The real-vLLM end-to-end run of ``pairs``."""
    src, out = tmp_path / "in.jsonl", tmp_path / "pairs.jsonl"
    write_pair_rows(src, 2)
    assert (
        main(
            [
                "pairs",
                str(src),
                "-o",
                str(out),
                "--server",
                vllm_server,
                "--rubric",
                "helpfulness",
                "--max-tokens",
                "8",
                "--force-verdict",
                "always",
                "--max-tie-rounds",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the tiny random model's verdicts are noise: check the accounting, not the preferences
    assert stats["rows"] == 2 and stats["pairs"] + stats["failed"] + sum(stats["skipped"].values()) == 2
    assert len(list(read_rows(out))) == stats["pairs"]
    skips = list(read_rows(tmp_path / "pairs.skipped.jsonl"))
    assert len(skips) == stats["failed"] + sum(stats["skipped"].values())


# -- a long job streams: memory does not grow with the file ----------------------------------------
from benchmarks.jobs_scale import PEAK_RSS  # noqa: E402  (prom-reward in a child that prints its peak RSS)


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
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    PEAK_RSS,
                    "grade",
                    str(src),
                    "-o",
                    str(dst),
                    "--rubric",
                    "helpfulness",
                    "--server",
                    url,
                    "--model",
                    "noop-judge",
                    "--batch-size",
                    "500",
                    "--quiet",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
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
    assert "error: --failure-reward: not set" in err and "--failure-reward / PROM_REWARD_FAILURE_REWARD" in err
    assert "judge_failed=1" in err


def test_reward_server_pairwise_group_requires_group_size(capsys):
    argv = ["reward-server", "--server", "http://127.0.0.1:9/v1", "--failure-reward", "0", "--mode", "pairwise_group"]
    assert main(argv) == 2
    assert "--group-size / PROM_REWARD_GROUP_SIZE" in capsys.readouterr().err


def _interrupt(args) -> int:
    raise KeyboardInterrupt


def _interrupting_parser(real):
    def build():
        parser = real()
        for name in ("grade", "report", "reward-server"):
            main_module._command(parser, name).set_defaults(func=_interrupt)
        return parser

    return build


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["grade", "in.jsonl", "-o", "o.jsonl", "--server", "http://127.0.0.1:9/v1"], "--resume to continue"),
        (["report", "graded.jsonl", "-o", "r.html"], None),
        (["reward-server", "--server", "http://127.0.0.1:9/v1", "--failure-reward", "min"], None),
    ],
)
def test_an_interrupt_points_to_resume_only_where_there_is_one(monkeypatch, capsys, argv, said) -> None:
    monkeypatch.setattr(main_module, "build_parser", _interrupting_parser(main_module.build_parser))
    assert main_module.main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("prom-reward: interrupted") and ("--resume" in err) == (said is not None), err
