"""The fault matrix of ``prom-reward grade``, ``compare`` and ``pairs`` (issue 24), against a stand-in judge
server on 127.0.0.1: every case ends with the user's data intact and either the right output or an
actionable ``prom-reward: error:`` (exit 2). ``--ray`` runs the same checks where they happen before any
batch is judged (refusals, repairs); the Ray runner's own faults: tests/jobs/test_ray_jobs.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from prom_reward.cli.main import main
from prom_reward.jobs.summary import EXIT_JUDGE_DOWN
from tests.jobs.helpers import JOBS, REPO, argv, cli, ids, judge_server, rows, write

N = 12  # 3 batches of 4


@pytest.fixture(scope="module")
def server():
    srv = judge_server()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, server):
    """An uninterrupted run of each job: what every repaired or resumed run must equal."""
    out = {}
    for job in JOBS:
        d = tmp_path_factory.mktemp(f"ref-{job}")
        src = write(d / "in.jsonl", rows(job, N))
        assert main(argv(job, src, d / "out.jsonl", server.url)) == 0
        out[job] = (d / "out.jsonl").read_text()
    return out


def run(job, src, out, url, *extra, capsys=None):
    code = main(argv(job, src, out, url, *extra))
    err = capsys.readouterr().err if capsys else ""
    return code, err


@pytest.mark.integration  # CLI runs in subprocesses, killed with SIGKILL
@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("point", ["part:0", "part:8", "merge"])
def test_sigkill_then_resume_gives_every_row_once(job, point, tmp_path, server, reference, capsys):
    """SIGKILL before the first commit, mid-way (about to commit the third batch) and during the final move:
    the resume's output equals an uninterrupted run, every input row once."""
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    hook = f"{point}:{tmp_path / 'killed'}"
    done = cli(argv(job, src, out, server.url), env={"PROM_REWARD_JOB_CRASH": hook})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not out.exists()
    if point != "part:0":  # committed batches are not started over by accident
        code, err = run(job, src, out, server.url, capsys=capsys)
        assert code == 2 and "was interrupted" in err and "--resume" in err
    assert main(argv(job, src, out, server.url, "--resume")) == 0
    assert out.read_text() == reference[job]
    assert ids(out) == list(range(N))
    if job == "pairs":
        assert (tmp_path / "out.skipped.jsonl").read_text() == ""


@pytest.mark.integration  # a CLI run in a subprocess, killed with SIGKILL
def test_sigkill_at_a_random_moment_then_resume(tmp_path, capsys):
    """A real kill -9 while batches are being judged (a slow judge), then --resume: each row once."""
    slow = judge_server(delay=0.05)
    try:
        src, out = write(tmp_path / "in.jsonl", rows("grade", 40)), tmp_path / "out.jsonl"
        proc = subprocess.Popen(
            [sys.executable, "-m", "prom_reward.cli", *argv("grade", src, out, slow.url)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        parts = tmp_path / "out.jsonl.parts"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(parts.glob("part-*"))) < 3 and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = len(list(parts.glob("part-*")))
        assert 3 <= before < 10 and not out.exists()
        capsys.readouterr()
        assert main(argv("grade", src, out, slow.url, "--resume")) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["resumed_rows"] == 4 * before and summary["rows"] == 40 - 4 * before
        assert ids(out) == list(range(40))
    finally:
        slow.stop()


@pytest.mark.parametrize("job", JOBS)
def test_truncated_output_is_repaired_by_resume(job, tmp_path, server, reference, capsys):
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    assert main(argv(job, src, out, server.url)) == 0
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 17])  # a cut last line (a full disk, a killed copy)
    code, err = run(job, src, out, server.url, capsys=capsys)
    assert code == 2 and "exists" in err and "--resume" in err and "--overwrite" in err
    assert out.read_bytes() == data[: len(data) - 17]  # refused: untouched
    assert main(argv(job, src, out, server.url, "--resume")) == 0
    assert out.read_text() == reference[job]


@pytest.mark.parametrize("job", JOBS)
def test_truncated_part_is_judged_again(job, tmp_path, server, reference, capsys):
    """A part cut short (its last line): removed and its batch judged again by the resume. (On Ray the
    batches left go to the actors: tests/jobs/test_ray_jobs.py.)"""
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    assert main(argv(job, src, out, server.url)) == 0
    part = tmp_path / "out.jsonl.parts" / "part-000000000004-000000000008.jsonl"
    part.write_bytes(part.read_bytes()[:-9])
    capsys.readouterr()
    assert main(argv(job, src, out, server.url, "--resume")) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["repaired_parts"], summary["rows"], summary["resumed_rows"]) == (1, 4, 8)
    assert out.read_text() == reference[job]


@pytest.mark.parametrize("path", ["local", "ray"])
@pytest.mark.parametrize("job", JOBS)
def test_corrupt_line(job, path, tmp_path, server, reference, capsys):
    """A garbage line in the merged output is repaired (rebuilt from the parts); one inside a committed part
    is refused, naming the part, the line and the fix."""
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    assert main(argv(job, src, out, server.url)) == 0
    extra = ("--ray",) if path == "ray" else ()
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:5] + ["{not json\n"] + lines[6:]))
    assert main(argv(job, src, out, server.url, "--resume", *extra)) == 0
    assert out.read_text() == reference[job]
    part = tmp_path / "out.jsonl.parts" / "part-000000000004-000000000008.jsonl"
    plines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(plines[:1] + ["\x00\x01garbage\n"] + plines[2:]))
    capsys.readouterr()
    code, err = run(job, src, out, server.url, "--resume", *extra, capsys=capsys)
    assert code == 2 and str(part) in err and "line 2" in err and "delete that part" in err
    assert out.read_text() == reference[job]


@pytest.mark.parametrize("path", ["local", "ray"])
@pytest.mark.parametrize("job", JOBS)
def test_foreign_output_is_refused(job, path, tmp_path, server, capsys):
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    other = write(tmp_path / "other.jsonl", rows(job, N, tag="x"))
    extra = ("--ray",) if path == "ray" else ()
    assert main(argv(job, other, out, server.url)) == 0
    before = out.read_bytes()
    code, err = run(job, src, out, server.url, "--resume", *extra, capsys=capsys)
    assert code == 2 and "written by another job" in err and "in.jsonl" in err and "sha256" in err
    assert "--overwrite" in err and out.read_bytes() == before
    code, err = run(job, src, out, server.url, "--resume", "--rubric", "honesty", *extra, capsys=capsys)
    assert code == 2 and "option rubric" in err
    # bytes of unknown origin: no manifest, so neither resumed nor overwritten silently
    stranger = tmp_path / "stranger.jsonl"
    stranger.write_bytes(bytes(range(256)) * 4)
    for flags in (("--resume",), ()):
        code, err = run(job, src, stranger, server.url, *flags, *extra, capsys=capsys)
        assert code == 2 and str(stranger) in err and "--overwrite" in err
    assert stranger.read_bytes() == bytes(range(256)) * 4


OUTPUT_ONTO_INPUT = [
    ("in.jsonl", "data/in.jsonl", "data/in.jsonl", "would write over its input file"),  # -o is the input
    ("in.jsonl", "data", "data/out.jsonl", "in the input folder"),  # read as input by the next run
    ("in.jsonl", "data/in.jsonl", "data", "would write over its input file"),  # a part folder holding it
]


@pytest.mark.parametrize(
    ("job", "name", "given", "out", "said"),
    [(job, *case) for job in JOBS for case in OUTPUT_ONTO_INPUT]
    + [("pairs", "o.skipped.jsonl", "data/o.skipped.jsonl", "data/o.jsonl", "would write over")],  # its skip file
)
def test_an_output_that_is_or_becomes_input_is_refused(job, name, given, out, said, tmp_path, server, capsys):
    """Refused before any work, with --overwrite too, the input intact."""
    (tmp_path / "data").mkdir()
    src = write(tmp_path / "data" / name, rows(job, N))
    before = src.read_bytes()
    code, err = run(job, tmp_path / given, tmp_path / out, server.url, "--overwrite", capsys=capsys)
    assert code == 2 and said in err and "fix: choose" in err, err
    assert src.read_bytes() == before and sorted(os.listdir(tmp_path / "data")) == [name]


@pytest.mark.parametrize(
    "manifest",
    [
        "[]",
        '{"version": 1}',
        '{"version": 1, "job": "grade", "inputs": "abc", "options": [], "judge": 5}',
        '{"version": 1, "job": "grade", "inputs": [1], "options": {}, "judge": {}}',
        '{"version": 1, "job": "grade", "inputs": [], "options": "x", "judge": {}}',
    ],
)
def test_a_foreign_manifest_is_refused_on_resume(manifest, tmp_path, server, capsys):
    src, out = write(tmp_path / "in.jsonl", rows("grade", N)), tmp_path / "out.jsonl"
    (tmp_path / "out.jsonl.parts").mkdir()
    (tmp_path / "out.jsonl.parts" / "_manifest.json").write_text(manifest)
    out.write_text("precious\n")
    code, err = run("grade", src, out, server.url, "--resume", capsys=capsys)
    assert code == 2 and "_manifest.json: not a job manifest; fix: start over with --overwrite" in err, err
    assert out.read_text() == "precious\n"


def test_an_input_that_shrinks_while_the_job_runs_stops_it(tmp_path):
    """Rows past the new end were dropped and the job said it was done (exit 0); now it stops, naming the file."""
    from prom_reward.backends.scripted import ScriptedBackend
    from prom_reward.errors import InputError
    from prom_reward.jobs.run import grade_file

    lines = [json.dumps({"instruction": f"Q{i}?", "response": "good " + "x" * 10_000}) + "\n" for i in range(300)]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(lines))  # 3 MB: read a megabyte at a time, so the cut is met mid-job

    def respond(request, i):
        if not (tmp_path / "cut").exists():
            (tmp_path / "cut").touch()
            with open(src, "r+") as f:
                f.truncate(len("".join(lines[:150])))  # at a line's end: what is left parses
        return "Fine. [RESULT] 4"

    with pytest.raises(InputError, match=r"in.jsonl: changed while the job ran \(rows 148..151 were checked, 2 of"):
        grade_file(src, out, {"backend": ScriptedBackend(respond=respond)}, rubric="helpfulness", batch_size=4)
    assert not out.exists()


@pytest.mark.parametrize("path", ["local", "ray"])
@pytest.mark.parametrize("job", JOBS)
def test_unwritable_output(job, path, tmp_path, server, capsys):
    src = write(tmp_path / "in.jsonl", rows(job, N))
    extra = ("--ray",) if path == "ray" else ()
    code, err = run(job, src, tmp_path / "no" / "such" / "out.jsonl", server.url, *extra, capsys=capsys)
    assert code == 2 and "does not exist" in err and "fix:" in err
    (tmp_path / "a-file").write_text("x")
    code, err = run(job, src, tmp_path / "a-file" / "out.jsonl", server.url, *extra, capsys=capsys)
    assert code == 2 and "not a folder" in err
    assert not (tmp_path / "no").exists() and (tmp_path / "a-file").read_text() == "x"


@pytest.mark.parametrize("job", JOBS)
def test_disk_full_keeps_the_previous_output_and_resumes(job, tmp_path, server, reference, capsys, monkeypatch):
    """ENOSPC while moving a new output into place (--overwrite): the old output is untouched; ENOSPC while
    committing a batch: the batches before it stay, and --resume completes the job."""
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    assert main(argv(job, src, out, server.url)) == 0
    old = out.read_bytes()
    monkeypatch.setenv("PROM_REWARD_JOB_CRASH", f"enospc:merge:{tmp_path / 'm1'}")
    code, err = run(job, src, out, server.url, "--overwrite", capsys=capsys)
    assert code == 2 and "disk is full" in err and str(out) in err and out.read_bytes() == old
    assert not list(tmp_path.glob("_tmp-*"))
    out.unlink()
    monkeypatch.setenv("PROM_REWARD_JOB_CRASH", f"enospc:part:8:{tmp_path / 'm2'}")
    code, err = run(job, src, out, server.url, "--overwrite", capsys=capsys)
    assert code == 2 and "disk is full" in err and "--resume" in err and not out.exists()
    assert main(argv(job, src, out, server.url, "--resume")) == 0
    assert out.read_text() == reference[job]


def test_disk_full_while_writing_bytes(tmp_path, server, capsys, monkeypatch):
    """The writer's own write fails with ENOSPC (injected): an OutputError naming the part and the disk."""
    import prom_reward.jobs.parts as parts

    real = parts.write_bytes

    def full(path, chunks):
        if "_manifest" in path.name:  # the manifest is written: the parts are not
            return real(path, chunks)
        raise OSError(errno.ENOSPC, "No space left on device")

    src, out = write(tmp_path / "in.jsonl", rows("grade", N)), tmp_path / "out.parquet"
    monkeypatch.setattr(parts, "write_bytes", full)
    code, err = run("grade", src, out, server.url, capsys=capsys)
    assert code == 2 and "part-000000000000-000000000004.parquet: cannot write: the disk is full" in err


@pytest.mark.parametrize("path", ["local", "ray"])
@pytest.mark.parametrize("job", JOBS)
def test_damaged_store_is_refused_before_any_work(job, path, tmp_path, server, capsys):
    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    store = tmp_path / "judgments.sqlite"
    store.write_bytes(b"this is not SQLite" * 100)
    extra = ("--ray",) if path == "ray" else ()
    code, err = run(job, src, out, server.url, "--store", str(store), *extra, capsys=capsys)
    assert code == 2 and (
        ("not a judgment store" in err and str(store) in err) if path == "local" else "--store with --ray" in err
    )
    assert not out.exists() and store.read_bytes() == b"this is not SQLite" * 100
    assert main(["store", "info", str(store)]) == 2
    assert "not a judgment store" in capsys.readouterr().err


@pytest.mark.parametrize("job", JOBS)
def test_locked_store_waits_the_timeout_then_says_so(job, tmp_path, server, capsys):
    from prom_reward.backends.store import JudgmentStore

    src, out = write(tmp_path / "in.jsonl", rows(job, N)), tmp_path / "out.jsonl"
    store = tmp_path / "judgments.sqlite"
    JudgmentStore(store).close()
    holder = sqlite3.connect(str(store), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t = time.perf_counter()
        code, err = run(job, src, out, server.url, "--store", str(store), "--store-timeout", "0.5", capsys=capsys)
        took = time.perf_counter() - t
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and "locked by another process" in err and "--store-timeout" in err and took < 10
    assert not out.exists()
    assert main(argv(job, src, out, server.url, "--store", str(store))) == 0  # free again: it works
    assert ids(out) == list(range(N))


@pytest.mark.parametrize("path", ["local", "ray"])
@pytest.mark.parametrize("job", JOBS)
def test_bad_input_names_file_line_row_column_and_fix(job, path, tmp_path, server, capsys):
    """Checked before the output is touched: an existing output stays byte for byte."""
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    extra = ("--ray",) if path == "ray" else ()
    data = rows(job, 60)
    col = {"grade": "response", "compare": "response_b", "pairs": "prompt"}[job]
    data[50][col] = 17
    src = write(tmp_path / "in.jsonl", data)
    code, err = run(job, src, out, server.url, "--batch-size", "16", "--overwrite", *extra, capsys=capsys)
    flag = {"grade": "--response-col", "compare": "--response-b-col", "pairs": "--prompt-col"}[job]
    assert code == 2 and "in.jsonl:51" in err and "row 50" in err and repr(col) in err and flag in err, err
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    code, err = run(job, binary, out, server.url, "--overwrite", *extra, capsys=capsys)
    assert code == 2 and "bin.jsonl:1" in err and "not UTF-8" in err
    bad_parquet = tmp_path / "bad.parquet"
    bad_parquet.write_bytes(b"PAR1 but not really")
    code, err = run(job, bad_parquet, out, server.url, "--overwrite", *extra, capsys=capsys)
    assert code == 2 and "not a readable Parquet file" in err
    code, err = run(job, tmp_path / "missing.jsonl", out, server.url, "--overwrite", *extra, capsys=capsys)
    assert code == 2 and "missing.jsonl: no such file" in err
    assert out.read_text() == "precious\n"
    assert "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path, server):
    done = cli(
        ["grade", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--server", server.url, "--debug"]
    )
    assert done.returncode == 1 and "Traceback" in done.stderr and "InputError" in done.stderr
    done = cli(["grade", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--server", server.url])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("prom-reward: error: ")


def test_backend_down_then_resume_judges_those_rows_again(tmp_path, capsys, reference):
    """A judge that is down: rows fail with "backend failed: ...", and a resume judges them again."""
    from tests.fakes import FakeServer

    down = FakeServer({})
    url = down.url
    down.stop()
    src, out = write(tmp_path / "in.jsonl", rows("grade", N)), tmp_path / "out.jsonl"
    assert main(argv("grade", src, out, url)) == EXIT_JUDGE_DOWN  # every row failed on the backend
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["score"] is None and r["judge_error"].startswith("backend failed") for r in got)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["backend_failed"] == N
    srv = judge_server()
    try:
        assert main(argv("grade", src, out, srv.url, "--resume")) == 0
    finally:
        srv.stop()
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["retried_rows"], summary["rows"], summary["backend_failed"]) == (N, N, 0)
    assert out.read_text() == reference["grade"]
