"""Stable row ids, shards and part files of the Ray job (``prom_reward.integrations.ray_shards``): no Ray needed."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prom_reward.errors import ConfigError
from prom_reward.integrations.ray_config import RayJobConfig, RaySummary
from prom_reward.integrations.ray_shards import (done_parts, expand_inputs, merge_parts, plan_shards, read_shard,
                                                 write_part)
from prom_reward.io import read_rows


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
