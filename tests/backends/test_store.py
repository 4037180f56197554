"""The judgment store: keys, exact round trips, export, concurrent writers, crash and resume."""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends import CachedBackend
from prom_reward.backends.base import Completion, GenerationRequest, GenerationResult, TokenLogprobs
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.backends.store import JudgmentStore, request_key, result_from_dict, result_to_dict
from prom_reward.cli.main import main
from prom_reward.errors import ConfigError
from prom_reward.jobs.source import read_rows

REPO = Path(__file__).resolve().parents[2]


def scripted(text: str = "Good. [RESULT] 4") -> ScriptedBackend:
    return ScriptedBackend(respond=lambda req, i: text)


def test_second_identical_grade_makes_no_backend_request(tmp_path):
    backend = scripted()
    judge = PrometheusJudge(backend=backend, store=tmp_path / "j.sqlite")
    args = (["q1", "q2", "q3"], ["r1", "r2", "r3"], "helpfulness")
    first = judge.grade(*args)
    assert len(backend.calls) == 1 and judge.backend.misses == 3
    second = judge.grade(*args)
    assert len(backend.calls) == 1 and judge.backend.hits == 3
    assert second == first
    judge.close()
    # a new judge on the same file (a re-run) also recomputes nothing
    backend2 = scripted("Other. [RESULT] 1")
    again = PrometheusJudge(backend=backend2, store=str(tmp_path / "j.sqlite")).grade(*args)
    assert backend2.calls == [] and again == first


def test_retry_attempt_is_a_different_key(tmp_path):
    outputs = iter(["no verdict", "Fine. [RESULT] 3", "no verdict", "Fine. [RESULT] 3"])
    backend = ScriptedBackend(respond=lambda req, i: next(outputs))
    judge = PrometheusJudge(backend=backend, store=tmp_path / "j.sqlite", max_retries=1)
    (g,) = judge.grade(["q"], ["r"], "helpfulness")
    assert g.score == 3 and g.retries == 1
    assert [c[0].attempt for c in backend.calls] == [0, 1]
    assert len(judge.backend.store) == 2
    (again,) = judge.grade(["q"], ["r"], "helpfulness")  # both rounds replayed from the store
    assert again == g and len(backend.calls) == 2


def test_keys_differ_by_sampling_rubric_model_and_attempt():
    req = GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1))
    fp = {"name": "vllm", "model": "a", "wire": "chat"}
    base = request_key(fp, req)
    assert base == request_key(dict(fp), GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1)))
    variants = [
        request_key(fp, GenerationRequest("sys", "user", sampling=SamplingConfig(seed=2))),
        request_key(fp, GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1, max_tokens=7))),
        request_key(fp, GenerationRequest("sys", "user (another rubric)", sampling=SamplingConfig(seed=1))),
        request_key(fp, GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1), n=2)),
        request_key(fp, GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1), attempt=1)),
        request_key(fp, GenerationRequest("sys", "user", sampling=SamplingConfig(seed=1), assistant_prefix="x")),
        request_key({**fp, "model": "b"}, req),
        request_key({**fp, "wire": "inst"}, req),
        request_key(fp, req, dup=1),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_rubric_change_misses_and_duplicates_in_one_batch_stay_independent(tmp_path):
    counter = iter(range(100))
    backend = ScriptedBackend(respond=lambda req, i: f"v{next(counter)} [RESULT] 4")
    judge = PrometheusJudge(backend=backend, store=tmp_path / "j.sqlite")
    a = judge.grade(["q", "q"], ["r", "r"], "helpfulness")
    assert a[0].feedback != a[1].feedback  # two samples, two keys
    judge.grade(["q"], ["r"], "honesty")
    assert judge.backend.misses == 3 and len(judge.backend.store) == 3
    assert judge.grade(["q", "q"], ["r", "r"], "helpfulness") == a and len(backend.calls) == 2


def test_round_trip_with_logprobs_is_exact(tmp_path):
    lps = (
        TokenLogprobs("Good", -0.25, {"Good": -0.25, "Bad": -1.5e-9}),
        TokenLogprobs(" 4", -math.inf, {" 4": -math.inf, "é✓": -3.0000000000000004}),
    )
    res = GenerationResult((Completion("Good 4", lps, "stop", 2), Completion("x", None, None, 0)), prompt_tokens=17)
    assert result_from_dict(json.loads(json.dumps(result_to_dict(res)))) == res
    store = JudgmentStore(tmp_path / "j.sqlite")
    store.put_many([("k", "m", GenerationRequest("s", "u"), res)])
    back = JudgmentStore(tmp_path / "j.sqlite").get_many(["k", "missing"])
    assert back == {"k": res}
    assert isinstance(back["k"].completions, tuple) and isinstance(back["k"].completions[0].logprobs, tuple)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export_has_one_row_per_key(tmp_path, suffix):
    judge = PrometheusJudge(backend=scripted(), store=tmp_path / "j.sqlite")
    judge.grade([f"q{i}" for i in range(5)], ["r"] * 5, "helpfulness")
    judge.grade([f"q{i}" for i in range(5)], ["r"] * 5, "helpfulness")
    store = judge.backend.store
    out = tmp_path / f"export{suffix}"
    assert main(["store", "export", str(store.path), "-o", str(out)]) == 0
    rows = list(read_rows(out))
    assert sorted(r["key"] for r in rows) == sorted(store.keys())
    req = rows[0]["request"] if suffix == ".jsonl" else json.loads(rows[0]["request"])
    assert req["sampling"]["max_tokens"] == 1024 and req["attempt"] == 0


def test_store_pickles_and_reconnects(tmp_path):
    store = JudgmentStore(tmp_path / "j.sqlite")
    store.put_many([("k", None, GenerationRequest("s", "u"), GenerationResult((Completion("t"),)))])
    copy = pickle.loads(pickle.dumps(store))
    assert len(copy) == 1 and "k" in copy and copy.path == store.path
    store.close()
    store.close()


def test_bad_store_argument_says_what_to_pass(tmp_path):
    with pytest.raises(ConfigError, match="expected a path or a JudgmentStore"):
        PrometheusJudge(backend=scripted(), store=42)
    with pytest.raises(ConfigError, match="expected an SQLite file"):
        JudgmentStore(tmp_path / "out.jsonl")


def test_cached_backend_delegates(tmp_path):
    inner = ScriptedBackend(outputs=["a"], context=99)
    b = CachedBackend(inner, tmp_path / "j.sqlite")
    assert b.name == "scripted" and asyncio.run(b.acontext_length()) == 99 and b.gpu_memory_share is None
    assert b.inner.remaining == 1 and not hasattr(b, "remaining")  # the protocol's members only, no forwarding
    assert asyncio.run(b.acount_tokens([GenerationRequest("s", "u v")])) == asyncio.run(
        inner.acount_tokens([GenerationRequest("s", "u v")])
    )
    b.close()


def _writer(path: str, start: int) -> None:
    store = JudgmentStore(path)
    res = GenerationResult((Completion("Good. [RESULT] 4", (TokenLogprobs("4", -0.1, {"4": -0.1}),)),), 5)
    keys = [f"key-{i}" for i in range(start, start + 500)]
    for j in range(0, len(keys), 20):
        store.put_many([(k, "m", GenerationRequest("s", k), res) for k in keys[j : j + 20]])
    store.close()


def test_concurrent_writers_do_not_corrupt(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")  # four processes with a connection each: "spawn" re-imported the suite's modules
    procs = [ctx.Process(target=_writer, args=(path, p * 250)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = JudgmentStore(path)
    assert store.integrity_check() == "ok"
    assert len(store) == 250 * 3 + 500 == len(set(store.keys()))


CLIENT = textwrap.dedent("""
    import json, sys, time
    from prom_reward import PrometheusJudge

    def main():
        url, store, n, chunk, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
        judge = PrometheusJudge(backend="openai", base_url=url, store=store, sampling={"max_tokens": 4},
                                max_retries=0)
        print("ready", flush=True)
        for start in range(0, n, chunk):
            idx = range(start, min(n, start + chunk))
            judge.grade([f"Question {i}?" for i in idx], [f"Answer {i}." for i in idx], "helpfulness")
            print("chunk", start // chunk, flush=True)
            time.sleep(pause)
        print("counters", json.dumps({"hits": judge.backend.hits, "misses": judge.backend.misses}), flush=True)
        judge.close()

    if __name__ == "__main__":
        main()
""")


@pytest.mark.integration
def test_killed_client_resumes_from_store_and_recomputes_nothing_stored(vllm_server, tmp_path):
    """A client process judging against the session's real vLLM server is SIGKILLed mid-job; the re-run
    replays what the store holds and judges only the rest. (The store sits in the client, whatever the
    backend; the server keeps the test from paying two engine starts.)"""
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    store_path = tmp_path / "judgments.sqlite"
    n, chunk = 60, 10
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))

    def cmd(pause: float) -> list[str]:
        return [sys.executable, str(script), vllm_server, str(store_path), str(n), str(chunk), str(pause)]

    # run 1: killed (SIGKILL, with its engine workers) once it has finished at least 2 chunks
    proc = subprocess.Popen(
        cmd(1.5),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    done = []
    deadline = time.monotonic() + 300
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("chunk"):
                done.append(int(line.split()[1]))
            if len(done) >= 2 or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    assert len(done) >= 2, "the client never finished 2 chunks"
    with JudgmentStore(store_path) as store:
        stored_before = len(store)
        keys_before = set(store.keys())
        assert store.integrity_check() == "ok"
    assert len(done) * chunk <= stored_before  # completed chunks are stored

    # run 2: to completion; it recomputes only what was not stored (forcing requests included: 4 tokens
    # cut every output, so the default policy forces them, one more stored request per item)
    out = subprocess.run(cmd(0.0), cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    counters = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("counters")).split(" ", 1)[1])
    with JudgmentStore(store_path) as store:
        total = len(store)
        assert keys_before <= set(store.keys())
    assert stored_before < total  # the first run was cut short
    assert counters == {"hits": stored_before, "misses": total - stored_before}
    entries = list(JudgmentStore(store_path).entries())
    for i in range(n):  # one stored generation per item, and at most one forcing request
        mine = [r["request"] for r in entries if f"Question {i}?" in r["request"]["user"]]
        assert sum(not r["assistant_prefix"] for r in mine) == 1 and len(mine) <= 2, (i, mine)


def test_cli_grade_takes_a_store_path():
    from prom_reward.cli.main import build_parser

    args = build_parser().parse_args(["grade", "in.jsonl", "-o", "out.jsonl", "--store", "j.sqlite"])
    assert args.store == "j.sqlite"


def test_tie_rounds_are_fresh_samples_with_a_store(tmp_path):
    """Each tie round is a new key, so a store never replays the tie it is trying to break."""
    from prom_reward import PrometheusJudge
    from prom_reward.backends.scripted import ScriptedBackend

    outputs = ["[RESULT] 3", "[RESULT] 3", "[RESULT] 2", "[RESULT] 4"]
    backend = ScriptedBackend(outputs=outputs)
    judge = PrometheusJudge(backend=backend, store=str(tmp_path / "s.sqlite"))
    (v,) = judge.compare_by_grades(["q"], ["a"], ["b"], "helpfulness")
    assert v.winner == "B" and v.tie_rounds == 1
    assert [r.attempt for c in backend.calls for r in c] == [0, 0, 1000, 1000]


# -- a store in front of misbehaving servers (real HTTP on 127.0.0.1, tests/fakes.py) --------------
def http_judge(url: str, store: Path, **kw: object) -> PrometheusJudge:
    return PrometheusJudge(
        backend="openai",
        base_url=url,
        model="fake",
        system_role=False,
        store=str(store),
        max_retries=0,
        **kw,
    )


@pytest.mark.parametrize("mode", ["500", "garbage", "hang"])
def test_failing_server_stores_nothing_and_names_the_endpoint(fake_server, tmp_path, mode):
    from tests.fakes import Reply

    replies: dict[str, Reply] = {
        "500": lambda k, b: (500, {"error": {"message": "engine died"}}),
        "garbage": lambda k, b: (200, b"<html>proxy error"),
        "hang": lambda k, b: None,
    }
    srv = fake_server({"/v1/chat/completions": replies[mode]})
    judge = http_judge(srv.url, tmp_path / "j.sqlite", timeout=0.5)
    grades = judge.grade(["q1", "q2"], ["a1", "a2"], "helpfulness")
    assert all(g.score is None and g.error.kind == "transport" and srv.url in g.error.reason for g in grades)
    assert len(srv.bodies("/v1/chat/completions")) == 2  # one attempt per request: asking again is the outage policy's
    with JudgmentStore(tmp_path / "j.sqlite") as store:
        assert len(store) == 0  # a failure is never stored as a result


def test_results_are_stored_as_they_arrive_and_a_rerun_sends_only_the_failed(fake_server, tmp_path):
    """Item 3 fails on every try; the others are stored anyway (streamed), and the re-run after
    the server is fixed sends exactly one request."""

    broken = {"on": True}

    def reply(k: int, b: dict) -> tuple[int, object]:
        if broken["on"] and "Question 3?" in b["messages"][-1]["content"]:
            return 500, {"error": {"message": "out of memory"}}
        return 200, {
            "choices": [{"index": 0, "message": {"content": "Fine. [RESULT] 4"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4},
        }

    srv = fake_server({"/v1/chat/completions": reply})
    path = tmp_path / "j.sqlite"
    questions, answers = [f"Question {i}?" for i in range(8)], [f"Answer {i}." for i in range(8)]
    judge = http_judge(srv.url, path, max_concurrency=2)
    first = judge.grade(questions, answers, "helpfulness")
    assert [g.score is None for g in first] == [i == 3 for i in range(8)]  # item 3 fails alone, as a value
    assert first[3].error.kind == "transport" and "out of memory" in first[3].error.reason
    with JudgmentStore(path) as store:
        stored = len(store)
    assert stored == 7  # every answered request was saved, the failed one was not
    broken["on"] = False
    calls_before = len(srv.bodies("/v1/chat/completions"))
    judge = http_judge(srv.url, path)
    grades = judge.grade(questions, answers, "helpfulness")
    assert [g.score for g in grades] == [4.0] * 8
    assert judge.backend.hits == stored and judge.backend.misses == 8 - stored
    assert len(srv.bodies("/v1/chat/completions")) - calls_before == 8 - stored
    with JudgmentStore(path) as store:
        assert len(store) == 8


def test_cli_store_info_and_export(tmp_path, capsys):
    from prom_reward.cli.main import main

    path = tmp_path / "j.sqlite"
    judge = PrometheusJudge(backend=scripted(), store=str(path))
    judge.grade(["q1", "q2", "q3"], ["a", "b", "c"], "helpfulness")
    assert main(["store", "info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["judgments"] == 3 and info["models"] == {"scripted": 3} and info["integrity"] == "ok"
    assert main(["store", "export", str(path), "-o", str(tmp_path / "e.parquet")]) == 0
    rows = list(read_rows(tmp_path / "e.parquet"))
    assert len(rows) == 3 and all("[RESULT] 4" in r["result"] for r in rows)
    assert main(["store", "export", str(path)]) == 2  # no -o: a clear error, exit 2
    assert "give -o" in capsys.readouterr().err
    assert main(["store", "info", str(tmp_path / "missing.sqlite")]) == 2
    assert "no judgment store there" in capsys.readouterr().err


def test_damaged_foreign_or_locked_stores_fail_at_open_naming_the_file(tmp_path):
    """Checked when the store opens (before any judging): not SQLite, another SQLite database, a store
    another process keeps locked (after ``timeout`` seconds, not the 30 s default)."""
    import sqlite3

    from prom_reward.errors import StoreError

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00garbage" * 512)
    with pytest.raises(StoreError, match=r"junk.sqlite: not a judgment store, or a damaged one .*fix:"):
        JudgmentStore(junk)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE judgments (id INTEGER)")
    with pytest.raises(StoreError, match=r"other.sqlite: not a usable judgment store .*no such column"):
        JudgmentStore(other)
    path = tmp_path / "j.sqlite"
    JudgmentStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t = time.monotonic()
        with pytest.raises(
            StoreError,
            match=r"j.sqlite: locked by another process for more than 0.3 s.*"
            r"--store-timeout",
        ):
            JudgmentStore(path, timeout=0.3)
        assert time.monotonic() - t < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with pytest.raises(StoreError, match="no judgment store there"):
        JudgmentStore(tmp_path / "missing.sqlite", create=False)


def test_a_deferred_backend_is_built_on_the_first_store_miss_only(tmp_path):
    """A backend built by a function (the in-process engine behind ``CachedBackend.deferred``) is not built
    while the store answers, not even for the context check; a judgment the store answered counts as stored."""
    path, args = tmp_path / "j.sqlite", (["q1", "q2"], ["r1", "r2"], "helpfulness")
    fingerprint = ScriptedBackend(outputs=[]).fingerprint
    made: list[ScriptedBackend] = []

    def build() -> ScriptedBackend:
        made.append(ScriptedBackend(respond=lambda req, i: "Good. [RESULT] 4", context=4096))
        return made[-1]

    deferred = {"fingerprint": fingerprint, "capabilities": ScriptedBackend.capabilities}
    first = PrometheusJudge(backend=CachedBackend(build, path, **deferred))
    graded = first.grade(*args)
    assert len(made) == 1 and first.backend.built and first.stats.samples == 2 and first.stats.stored_samples == 0
    generated = (first.stats.prompt_tokens, first.stats.completion_tokens)
    again = PrometheusJudge(backend=CachedBackend(build, path, **deferred))
    assert again.grade(*args) == graded and len(made) == 1 and not again.backend.built
    s = again.stats
    assert (s.samples, s.prompt_tokens, s.completion_tokens, s.stored_samples) == (0, 0, 0, 2)
    assert (s.stored_prompt_tokens, s.stored_completion_tokens) == generated
    again.grade(["q3"], ["r3"], "helpfulness")  # not stored: now it is built
    assert len(made) == 2 and again.backend.built and (again.stats.samples, again.stats.stored_samples) == (1, 2)
    again.close()
    first.close()


def test_deferred_only_for_the_in_process_engine(tmp_path):
    """``CachedBackend.deferred`` builds any other backend at once (an openai one connects only when asked)."""
    b = CachedBackend.deferred("openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, tmp_path / "j.sqlite")
    assert b.built and b.fingerprint == {"name": "openai", "model": "m", "wire": "chat"}
    with pytest.raises(ConfigError, match="no such folder"):
        CachedBackend.deferred("vllm", {"model": "/no/such/judge"}, tmp_path / "j.sqlite")
    b.close()


def test_another_apps_database_and_an_empty_file_are_refused_and_left_as_they_were(tmp_path, capsys):
    """A SQLite file of another application is not given a judgments table (nor switched to WAL); looking into
    (``create=False``: ``store info|export``) an empty file is refused, and it stays empty."""
    import sqlite3

    from prom_reward.errors import StoreError

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'a')")
    conn.close()
    before = other.read_bytes()
    with pytest.raises(StoreError, match=r"app.db: another SQLite database, not a judgment store \(its tables: users"):
        JudgmentStore(other)
    with pytest.raises(StoreError, match="another SQLite database"):
        PrometheusJudge(backend=scripted(), store=str(other))
    assert main(["store", "info", str(other)]) == 2
    assert "another SQLite database" in capsys.readouterr().err
    assert other.read_bytes() == before and not Path(f"{other}-wal").exists()
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert main(["store", "info", str(empty)]) == 2
    assert "an empty file, not a judgment store" in capsys.readouterr().err
    assert empty.stat().st_size == 0
    JudgmentStore(empty).close()  # a store may still be made in an empty file
    assert main(["store", "info", str(empty)]) == 0


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1"])
def test_a_store_timeout_that_is_not_finite_seconds_is_a_clear_error(tmp_path, timeout, capsys):
    path = tmp_path / "j.sqlite"
    JudgmentStore(path).close()
    assert main(["store", "info", str(path), "--timeout", timeout]) == 2
    assert "store timeout: expected seconds from 0 to 1e6" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="store timeout"):
        JudgmentStore(path, timeout=float(timeout))


@pytest.mark.parametrize(
    "damage", ["{not json", '{"completions": 5}', "[]", '{"completions": [{"text": 5}]}', '{"prompt_tokens": 1}']
)
def test_a_damaged_stored_judgment_is_a_store_error_naming_its_key(tmp_path, damage, capsys):
    """A row that is not what the store wrote (edited by hand, another tool) is never parsed into a judgment nor a
    traceback: a ``StoreError`` naming the file, the key and the fix; ``store export`` names it too (when the JSON is
    unreadable) and writes nothing."""
    import sqlite3

    from prom_reward.errors import StoreError

    path = tmp_path / "j.sqlite"
    PrometheusJudge(backend=scripted(), store=str(path)).grade(["q"], ["r"], "helpfulness")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE judgments SET result = ?", (damage,))
        (key,) = conn.execute("SELECT key FROM judgments").fetchone()
    conn.close()
    judge = PrometheusJudge(backend=scripted("Other. [RESULT] 1"), store=str(path))
    with pytest.raises(StoreError, match=rf"j.sqlite: the judgment stored under key {key} is damaged .*DELETE FROM"):
        judge.grade(["q"], ["r"], "helpfulness")
    judge.close()
    code = main(["store", "export", str(path), "-o", str(tmp_path / "e.jsonl")])
    if damage == "{not json":
        assert code == 2 and f"key {key} is damaged" in capsys.readouterr().err
        assert not (tmp_path / "e.jsonl").exists()
    else:
        assert code == 0  # exported as stored


def test_a_lone_surrogate_in_a_judge_answer_is_stored_and_read_back_exactly(tmp_path):
    """SQLite keeps only valid UTF-8: an answer holding a lone surrogate (a JSON ``\\udcff`` escape) is stored
    escaped, and comes back the same, instead of failing the batch."""
    path, text = tmp_path / "j.sqlite", "Good \udcff. [RESULT] 4"
    (first,) = PrometheusJudge(backend=scripted(text), store=str(path)).grade(["q"], ["r"], "helpfulness")
    assert first.score == 4 and first.samples[0].text == text
    again = PrometheusJudge(backend=scripted("Other. [RESULT] 1"), store=str(path))
    (second,) = again.grade(["q"], ["r"], "helpfulness")
    assert second.samples[0].text == text and again.backend.hits == 1


def test_a_full_disk_is_a_store_error_saying_so_and_what_was_saved_is_kept(tmp_path):
    """SQLite rolls a transaction back by itself when the disk is full: the error says the disk is full (it said
    "cannot rollback - no transaction is active"), the judgments saved before stay, and the store works once there
    is room. The full disk is played by SQLite's own page limit."""
    from prom_reward.errors import StoreError

    path = tmp_path / "j.sqlite"
    judge = PrometheusJudge(backend=scripted("pad " * 1000 + "Good. [RESULT] 4"), store=str(path))
    judge.grade(["q"], ["first"], "helpfulness")
    conn = judge.backend.store._connect()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(StoreError, match=r"j.sqlite: cannot save judgments: database or disk is full; fix: free"):
        judge.grade(["q"] * 20, [f"r{i}" for i in range(20)], "helpfulness")
    conn.execute("PRAGMA max_page_count = 1073741823")
    kept = len(judge.backend.store)
    assert 1 <= kept < 21 and judge.backend.store.integrity_check() == "ok"
    assert judge.grade(["q"], ["again"], "helpfulness")[0].score == 4 and len(judge.backend.store) == kept + 1
    judge.close()


def test_a_store_with_more_columns_takes_rows_and_one_that_cannot_is_refused_at_open(tmp_path):
    """A later version's store with an extra nullable column still takes judgments (rows name their columns); one
    whose extra column must be filled is refused when it opens, before any judging (``INSERT OR IGNORE`` skipped
    every row of it without a word, so nothing was ever stored)."""
    import sqlite3

    from prom_reward.errors import StoreError

    columns = "key TEXT PRIMARY KEY, model TEXT, request TEXT NOT NULL, result TEXT NOT NULL, created REAL NOT NULL"
    wider, stricter = tmp_path / "wider.sqlite", tmp_path / "stricter.sqlite"
    for path, extra in ((wider, "tokens INTEGER"), (stricter, "schema INTEGER NOT NULL")):
        with sqlite3.connect(path) as conn:
            conn.execute(f"CREATE TABLE judgments ({columns}, {extra})")
        conn.close()
    judge = PrometheusJudge(backend=scripted(), store=str(wider))
    assert judge.grade(["q"], ["r"], "helpfulness")[0].score == 4 and len(judge.backend.store) == 1
    judge.close()
    with pytest.raises(StoreError, match=r"stricter.sqlite: its judgments table is of another schema \(NOT NULL"):
        PrometheusJudge(backend=scripted(), store=str(stricter))
    with JudgmentStore(stricter, create=False) as store:  # looking into it still works
        assert len(store) == 0
