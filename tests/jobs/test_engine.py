"""The job engine's parts without a judge server: input files and row ids (``source``), part files and
their merge (``parts``), the plan of a resumed job (``plan``), the manifest, the options and the summary."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prom_reward.errors import ConfigError, InputError, OutputError
from prom_reward.jobs.kinds import GradeJob
from prom_reward.jobs.parts import done_parts, failed_parts, merge_parts, part_ids, write_part, write_rows
from prom_reward.jobs.plan import differences, judge_fingerprint, make_manifest, prepare_job, target
from prom_reward.jobs.source import expand_inputs, iter_rows, read_range, read_rows
from prom_reward.jobs.spec import JobConfig, RayConfig
from prom_reward.jobs.summary import JobSummary


def _two_files(tmp_path):
    pq.write_table(pa.table({"i": list(range(23))}), tmp_path / "a.parquet", row_group_size=5)
    (tmp_path / "b.jsonl").write_text(
        "".join(json.dumps({"i": 100 + i}) + ("\n\n" if i % 3 else "\n") for i in range(11))
    )
    return expand_inputs([str(tmp_path / "a.parquet"), str(tmp_path / "b.jsonl")])


def test_row_ids_run_across_files_and_places_name_the_line(tmp_path):
    got = list(iter_rows(_two_files(tmp_path)))
    assert [r.id for r in got] == list(range(34)) and [r.data["i"] for r in got][22:24] == [22, 100]
    assert got[0].where.endswith("a.parquet row 0") and got[23].where.endswith("b.jsonl:1")
    assert got[25].where.endswith("b.jsonl:4")  # blank lines are not rows, but they are lines


@pytest.mark.parametrize("batch", [1, 4, 7, 100])
def test_batches_left_cover_every_row_once_and_read_from_their_offsets(tmp_path, batch):
    """The plan's batches (file, byte offset, line) read back exactly the rows of their ids."""

    class Any_(GradeJob):  # a kind that accepts any row: only the reading is under test
        def preparer(self):
            return lambda row: row

    files = _two_files(tmp_path)
    plan = prepare_job(Any_(rubric="helpfulness"), files, tmp_path / "out.jsonl", {}, JobConfig(batch_size=batch))
    shards = plan.shards
    assert shards[0]["start"] == 0 and shards[-1]["stop"] == 34
    assert all(a["stop"] == b["start"] for a, b in zip(shards, shards[1:], strict=False))
    assert all(s["stop"] - s["start"] <= batch for s in shards)
    got = [
        r for s in shards for r in read_range(s["path"], s["first_id"], s["start"], s["stop"], s["offset"], s["line"])
    ]
    assert [r.id for r in got] == list(range(34))
    assert [r.data["i"] for r in got] == list(range(23)) + [100 + i for i in range(11)]


def test_inputs_that_cannot_be_read(tmp_path):
    for name in ("b.jsonl", "a.jsonl", "notes.txt"):
        (tmp_path / name).write_text('{"x": 1}\n')
    assert [f.rsplit("/", 1)[1] for f in expand_inputs(str(tmp_path))] == ["a.jsonl", "b.jsonl"]
    with pytest.raises(InputError, match="missing.jsonl: no such file"):
        expand_inputs(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError, match="unsupported file type '.txt'"):
        expand_inputs(str(tmp_path / "notes.txt"))
    cases = {
        "x.jsonl": (b'{"a": 1}\n[1, 2]\n', r"x.jsonl:2: expected a JSON object per line, got list"),
        "y.jsonl": (b'{"a": 1}\n{"a": \n', r"y.jsonl:2: not valid JSON"),
        "z.jsonl": (b'{"a": "\xff\xfe"}\n', r"z.jsonl:1: not UTF-8 text"),
        "w.json": (b'[{"a": 1}, 5]', r"w.json row 1: expected a JSON object, got int"),
        "u.json": (b'{"a": 1}\n7\n', r"u.json:2: expected a JSON object per line, got int"),  # JSON lines
        "v.parquet": (b"PAR1garbagePAR1", r"v.parquet: not a readable Parquet file"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match=message):
            list(read_rows(tmp_path / name))
    (tmp_path / "lines.json").write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n{"a": 2}\n')  # as the Prometheus collections ship
    assert list(read_rows(tmp_path / "lines.json")) == [{"a": 1}, {"a": 2}]


def test_parts_are_atomic_replaced_not_doubled_and_merged_in_id_order(tmp_path):
    schema = pa.schema([("source_index", pa.int64()), ("score", pa.float64())])
    write_part(
        tmp_path, 2, 4, [{"source_index": 2, "score": None}, {"source_index": 3, "score": 4.0}], "parquet", schema
    )
    write_part(
        tmp_path,
        0,
        2,
        [{"source_index": 0, "score": None}, {"source_index": 1, "score": None}],
        "parquet",
        schema,
        failed="backend failed: down",
    )
    write_part(
        tmp_path, 2, 4, [{"source_index": 2, "score": 1.0}, {"source_index": 3, "score": 4.0}], "parquet", schema
    )  # judged again: replaced
    (tmp_path / "_tmp-1-part-000000000004-000000000006.parquet").write_bytes(b"half a file")
    assert sorted(done_parts(tmp_path)) == [(0, 2), (2, 4)] and sorted(failed_parts(tmp_path)) == [(0, 2)]
    write_part(
        tmp_path, 0, 2, [{"source_index": 0, "score": 5.0}, {"source_index": 1, "score": 2.0}], "parquet", schema
    )
    assert failed_parts(tmp_path) == {}  # a good part removed the marker
    assert merge_parts(tmp_path, tmp_path / "all.parquet", "parquet", schema) == 4
    assert [r["score"] for r in read_rows(tmp_path / "all.parquet")] == [5.0, 2.0, 1.0, 4.0]
    assert part_ids(done_parts(tmp_path)[(2, 4)]) == [2, 3]


def test_part_ids_tell_a_torn_part_from_a_changed_one(tmp_path):
    p = write_part(tmp_path, 0, 2, [{"source_index": 0}, {"source_index": 1}], "jsonl")
    data = p.read_bytes()
    p.write_bytes(data[:-3])
    assert part_ids(p) is None  # cut short: judged again
    p.write_bytes(b'{"source_index": 0}\nnot a row\n')
    with pytest.raises(OutputError, match=r"line 2 is not a row this job wrote; .* delete that part file"):
        part_ids(p)


def test_write_rows_replaces_the_output_only_when_complete(tmp_path):
    out = tmp_path / "e.jsonl"
    out.write_text("old\n")

    def batches():
        yield [{"a": 1}]
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="e.jsonl: cannot write: the disk is full"):
        write_rows(out, batches())
    assert out.read_text() == "old\n" and not list(tmp_path.glob("_tmp-*"))
    assert write_rows(tmp_path / "e.parquet", iter([[{"a": {"b": 1}, "c": None}], [{"a": None, "c": "x"}]])) == 2
    assert list(read_rows(tmp_path / "e.parquet")) == [{"a": '{"b": 1}', "c": None}, {"a": None, "c": "x"}]


def test_targets_and_the_output_rules(tmp_path):
    assert target(tmp_path / "x.jsonl", GradeJob()).folder.name == "x.jsonl.parts"
    assert (t := target(tmp_path / "graded", GradeJob())).merged is False and t.fmt == "parquet"
    with pytest.raises(ConfigError, match="a JSON array cannot be written"):
        target(tmp_path / "x.json", GradeJob())
    from prom_reward.jobs.pairs import PairsJob

    with pytest.raises(ConfigError, match="use a .jsonl output"):
        target(tmp_path / "pairs.parquet", PairsJob())
    assert target(tmp_path / "pairs.jsonl", PairsJob()).skipped.name == "pairs.skipped.jsonl"


def test_manifest_differences_name_what_changed():
    inputs = [{"path": "/a/in.jsonl", "size": 10, "rows": 2, "sha256": "aa"}]
    a = make_manifest("grade", inputs, {"rubric": "x"}, judge_fingerprint({"model": "m", "base_url": "u1"}), "jsonl")
    b = make_manifest(
        "grade",
        [{**inputs[0], "path": "/b/moved.jsonl"}],
        {"rubric": "x"},
        judge_fingerprint({"model": "m", "base_url": "u2"}),
        "jsonl",
    )
    assert differences(a, b) == []  # a moved input with the same bytes, another server URL: the same job
    c = make_manifest(
        "compare",
        [{**inputs[0], "sha256": "bb", "rows": 3}],
        {"rubric": "y"},
        judge_fingerprint({"model": "n"}),
        "parquet",
    )
    got = differences(a, c)
    assert got[0] == "job 'grade' then, 'compare' now" and "rows, sha256 differ" in got[1]
    assert "option rubric: 'x' then, 'y' now" in got and "judge option model: 'm' then, 'n' now" in got
    assert got[-1] == "output format 'jsonl' then, 'parquet' now"


def test_options_are_validated():
    with pytest.raises(ConfigError, match="batch_size"):
        JobConfig(batch_size=0)
    with pytest.raises(ConfigError, match="give one"):
        JobConfig(resume=True, overwrite=True)
    with pytest.raises(ConfigError, match="replicas"):
        RayConfig(replicas="some")
    for bad in (float("nan"), float("inf"), 0, "2"):  # NaN was a ValueError traceback when the pool was sized
        with pytest.raises(
            ConfigError, match=r"^num_cpus: expected a (finite )?number > 0, got .*; fix: give a (finite )?n"
        ):
            RayConfig(num_cpus=bad)
    for bad in (float("nan"), -1):
        with pytest.raises(ConfigError, match=r"^num_gpus: expected a (finite )?number >= 0 or None, got") as e:
            RayConfig(num_gpus=bad)
        assert e.value.setting == "num_gpus"  # the command line says it as --gpus-per-replica (its dest)
    from prom_reward.jobs.run import grade_file

    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['rows_per_shard'\]; fix: .*batch_size"):
        grade_file("in.jsonl", "out.jsonl", {}, rows_per_shard=3)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['replicas'\]"):  # a Ray option only with ray=
        grade_file("in.jsonl", "out.jsonl", {}, replicas=2)
    with pytest.raises(ConfigError, match="^replicas: "):  # ray=True: RayConfig's fields, checked
        grade_file("in.jsonl", "out.jsonl", {}, ray=True, replicas=0)
    with pytest.raises(ConfigError, match="judge: on Ray give PrometheusJudge keyword arguments"):
        grade_file("in.jsonl", "out.jsonl", object(), ray=RayConfig(replicas=2))


def test_summary_counts_and_text():
    s = JobSummary(job="compare", output="out.parquet")
    s.add(
        {
            "rows": 10,
            "judged": 7,
            "failed": 1,
            "retried": 2,
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "skipped": '{"swap_disagreement": 2}',
            "worker": "n:1",
            "seconds": 2.0,
        }
    )
    s.seconds = 4.0
    text = s.text()
    assert (
        "compare: 10 rows (0 resumed)" in text
        and "10 rows: 7 judged, 1 failed (see judge_error), 2 skipped (swap_disagreement 2)" in text
        and "replica n:1: 10 rows, 5.00 rows/s" in text
    )
    assert dataclasses.asdict(s)["workers"]["n:1"]["rows"] == 10
