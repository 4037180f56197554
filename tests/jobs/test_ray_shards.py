"""Stable row ids, shards and part files of the Ray job (``prom_reward.jobs.shards``): no Ray needed."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prom_reward.errors import BackendError, ConfigError
from prom_reward.jobs.ray_config import RayJobConfig, RaySummary
from prom_reward.jobs.shards import (done_parts, expand_inputs, failed_parts, merge_parts, plan_shards,
                                                 read_shard, write_part)
from prom_reward.jobs.io import read_rows


@pytest.mark.parametrize("size", [1, 4, 7, 100])
def test_shards_cover_every_row_once_across_files_and_row_groups(tmp_path, size):
    pq.write_table(pa.table({"i": list(range(23))}), tmp_path / "a.parquet", row_group_size=5)
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"i": 100 + i}) + ("\n\n" if i % 3 else "\n")
                                              for i in range(11)))
    files = expand_inputs([str(tmp_path / "a.parquet"), str(tmp_path / "b.jsonl")])
    shards = list(plan_shards(files, size))
    assert [s["start"] for s in shards] == sorted(s["start"] for s in shards)
    assert all(a["stop"] == b["start"] for a, b in zip(shards, shards[1:])) and shards[-1]["stop"] == 34
    got = [r["i"] for s in shards for r in read_shard(s)]
    assert got == list(range(23)) + [100 + i for i in range(11)]


def test_folder_input_is_its_files_sorted(tmp_path):
    for name in ("b.jsonl", "a.jsonl", "notes.txt"):
        (tmp_path / name).write_text('{"x": 1}\n')
    assert [f.rsplit("/", 1)[1] for f in expand_inputs(str(tmp_path))] == ["a.jsonl", "b.jsonl"]
    with pytest.raises(ConfigError, match="no such file"):
        expand_inputs(str(tmp_path / "missing.jsonl"))


def test_parts_are_atomic_replaced_not_duplicated_and_merged_in_id_order(tmp_path):
    write_part(tmp_path, 2, 4, [{"i": 2, "score": None}, {"i": 3, "score": 4.0}], "parquet")
    write_part(tmp_path, 0, 2, [{"i": 0, "score": 5.0}, {"i": 1, "score": 1.0}], "parquet")
    write_part(tmp_path, 2, 4, [{"i": 2, "score": None}, {"i": 3, "score": 4.0}], "parquet")  # a retried shard
    (tmp_path / "_tmp-1-part-000000000004-000000000006.parquet").write_bytes(b"half a file")
    assert sorted(done_parts(tmp_path)) == [(0, 2), (2, 4)]
    assert merge_parts(tmp_path, tmp_path / "all.parquet") == 4
    assert [(r["i"], r["score"]) for r in read_rows(tmp_path / "all.parquet")] == [(0, 5.0), (1, 1.0), (2, None),
                                                                                 (3, 4.0)]


def test_config_validation_and_summary_text():
    with pytest.raises(ConfigError, match="rows_per_shard"):
        RayJobConfig(judge={}, rows_per_shard=0)
    with pytest.raises(ConfigError, match="replicas"):
        RayJobConfig(judge={}, replicas="some")
    s = RaySummary(output="out.parquet")
    s.add({"rows": 10, "failed": 1, "retried": 2, "forced": 0, "prompt_tokens": 100, "completion_tokens": 20,
           "pairs": 0, "skipped": "{}", "replica": "n:1", "seconds": 2.0})
    s.seconds = 4.0
    assert "judged 10 rows" in s.text() and "replica n:1: 10 rows, 5.00 rows/s" in s.text()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_backend_failed_parts_are_marked_until_a_good_part_replaces_them(tmp_path, fmt):
    write_part(tmp_path, 0, 2, [{"i": 0, "score": 5.0}, {"i": 1, "score": None}], fmt)  # no verdict: final
    write_part(tmp_path, 2, 4, [{"i": 2, "score": None}, {"i": 3, "score": None}], fmt, failed="backend failed: x")
    assert sorted(done_parts(tmp_path)) == [(0, 2), (2, 4)] and sorted(failed_parts(tmp_path)) == [(2, 4)]
    marker = tmp_path / f"_failed-part-000000000002-000000000004.{fmt}"
    assert marker.read_text() == "backend failed: x"
    (tmp_path / f"_failed-part-000000000004-000000000006.{fmt}").write_text("a part killed before its rename")
    assert sorted(failed_parts(tmp_path)) == [(2, 4)]  # a marker without its part: the shard is to do anyway
    write_part(tmp_path, 2, 4, [{"i": 2, "score": 3.0}, {"i": 3, "score": 4.0}], fmt)  # judged again, fine
    assert failed_parts(tmp_path) == {} and not marker.exists()
    assert merge_parts(tmp_path, tmp_path / f"all.{fmt}") == 4
    assert [r["score"] for r in read_rows(tmp_path / f"all.{fmt}")] == [5.0, None, 3.0, 4.0]


def test_resume_judges_again_only_the_shards_whose_backend_failed(tmp_path, monkeypatch):
    """run_job's planning and the judge actor's code, in process (Ray's map_batches replaced by a loop)."""
    from prom_reward.backends.scripted import ScriptedBackend
    from prom_reward.jobs import ray_run as ray_grade

    state = {"down": True, "calls": 0}

    def respond(request, i):  # the backend is down for rows 4..7 (shard 1) while state["down"]
        state["calls"] += 1
        if state["down"] and "row 5 " in request.user:
            raise BackendError("connection refused")
        return "Ok. [RESULT] 4" if "row 2 " not in request.user else "no verdict here"

    def in_process(todo, spec, cfg, summary):
        worker = ray_grade._JudgeWorker(spec)
        for shard in todo:
            summary.add(worker._shard(shard))

    monkeypatch.setattr(ray_grade, "_judge", in_process)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"instruction": f"row {i} ?", "response": "r", "id": i}) + "\n"
                           for i in range(10)))
    out = tmp_path / "out.jsonl"
    judge = {"backend": ScriptedBackend(respond=respond), "max_retries": 0}
    s = ray_grade.grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=4, progress=False)
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(10))
    assert [r["id"] for r in got if (r["judge_error"] or "").startswith("backend failed")] == [4, 5, 6, 7]
    assert (s.rows, s.failed, s.backend_failed, s.retried_shards) == (10, 5, 4, 0)
    assert "--resume" in s.text()
    assert sorted(failed_parts(str(out) + ".parts")) == [(4, 8)]

    state.update(down=False, calls=0)
    s = ray_grade.grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=4, progress=False,
                                resume=True)
    got = list(read_rows(out))
    assert [r["id"] for r in got] == list(range(10)) and state["calls"] == 4  # only shard [4, 8) again
    assert [r["score"] for r in got] == [4.0, 4.0, None, 4.0] + [4.0] * 6  # row 2: no verdict, kept as judged
    assert got[2]["judge_error"].startswith("no verdict")
    assert (s.rows, s.resumed_rows, s.retried_shards, s.retried_rows, s.backend_failed) == (4, 6, 1, 4, 0)
    assert "retried 4 rows in 1 shards" in s.text() and failed_parts(str(out) + ".parts") == {}
    s = ray_grade.grade_dataset(str(src), out, judge=judge, rubric="helpfulness", rows_per_shard=4, progress=False,
                                resume=True)
    assert (s.rows, s.resumed_rows, state["calls"]) == (0, 10, 4)  # nothing left to judge


def test_warm_up_leaves_the_counters_and_a_failing_backend_to_the_shards():
    from prom_reward.backends.scripted import ScriptedBackend
    from prom_reward.jobs.ray_run import warm_up
    from prom_reward.core.judge import PrometheusJudge

    judge = PrometheusJudge(backend=ScriptedBackend(respond=lambda r, i: "Fine. [RESULT] 3"))
    warm_up(judge)
    assert len(judge.backend.calls) == 1 and judge.stats == type(judge.stats)()  # counters as before

    def down(request, i):
        raise BackendError("connection refused")

    warm_up(PrometheusJudge(backend=ScriptedBackend(respond=down)))  # no raise: the shards record it
