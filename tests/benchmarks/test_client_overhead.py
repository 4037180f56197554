"""benchmarks.client_overhead against the real no-op server on a few items: the rows and ratios its record
holds, never timings."""

from __future__ import annotations

import json

import pytest

from benchmarks.client_overhead import bench_noop, main

pytestmark = pytest.mark.integration  # a no-op server process and real HTTP on 127.0.0.1


def test_noop_rounds_give_one_row_per_path():
    rows = bench_noop(20, 4, None, with_httpx=True, repeat=2)
    assert [r["path"].split(" (")[0] for r in rows] == [
        "raw aiohttp",
        "raw httpx",
        "OpenAIServer.generate",
        "PrometheusJudge.grade",
    ]
    assert all(r["judgments"] == 20 and r["client_cpu_us_per_judgment"] > 0 for r in rows)
    assert rows[0]["cpu_over_raw_paired"] == 1.0 and all(r["cpu_over_raw_paired"] > 0 for r in rows)


def test_the_record_holds_the_cpu_ratio(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--items", "10", "--concurrency", "2", "--repeat", "1", "--no-pin", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    cpu = [r["client_cpu_us_per_judgment"] for r in record["noop"]]
    assert record["noop_cpu_ratio_judge_over_raw"] == round(cpu[-1] / cpu[0], 3)
    assert record["noop_cpu_ratio_paired"] == record["noop"][-1]["cpu_over_raw_paired"] > 0
    assert "client CPU per judgment, judge / raw" in capsys.readouterr().out
