"""benchmarks.merge_speed end to end on tiny Llama-shaped checkpoints: the floor, the method rows and,
with ``--repeat``, the summary of median ratios (assertions on the output's structure, never on timings)."""

from __future__ import annotations

import re

import pytest

from benchmarks import merge_speed

pytestmark = pytest.mark.integration  # benchmarks.merge_speed end to end, numba kernels compiled


def test_repeat_rounds_end_with_a_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(merge_speed, "HIDDEN", 64)
    monkeypatch.setattr(merge_speed, "INTER", 128)
    monkeypatch.setattr(merge_speed, "VOCAB", 256)
    assert (
        merge_speed.main(
            [
                "--size-gb",
                "0.0005",
                "--shard-mb",
                "1",
                "--methods",
                "linear,ties",
                "--repeat",
                "2",
                "--dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("I/O floor, 3 inputs + 1 output") == 2 and "-- round 2 of 2" in out
    rounds, summary = out.split("-- over 2 rounds")
    rows = re.findall(r"^(linear|ties) +numba +([\d.]+) +([\d.]+) ", rounds, re.M)
    assert [r[0] for r in rows] == ["linear", "ties"] * 2 and all(float(s) > 0 for _, s, _ in rows)
    med = dict(re.findall(r"^(linear|ties) +numba +[\d.]+ +([\d.]+) +[\d.]+-[\d.]+ +[\d.]+ ", summary, re.M))
    ratios = {m: sorted(float(r) for n, _, r in rows if n == m) for m in ("linear", "ties")}
    for m, (a, b) in ratios.items():  # the median of two rounds lies between them
        assert a - 0.01 <= float(med[m]) <= b + 0.01
    assert not (tmp_path / "base").exists()  # generated files removed without --keep


def test_out_dir_takes_the_outputs_and_the_floor_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(merge_speed, "HIDDEN", 64)
    monkeypatch.setattr(merge_speed, "INTER", 128)
    monkeypatch.setattr(merge_speed, "VOCAB", 256)
    seen: dict[str, list] = {"floor": [], "merge": []}
    io_floor, run_method = merge_speed.io_floor, merge_speed.run_method

    def floor(inputs, out_bytes, scratch):
        seen["floor"].append(scratch.parent)
        return io_floor(inputs, out_bytes, scratch)

    def method(root, row, threads, pythonpath=None, out=None):
        r = run_method(root, row, threads, pythonpath, out)
        seen["merge"].append(out)
        assert not (out / f"out-{row}").exists()  # removed after the measurement
        return r

    monkeypatch.setattr(merge_speed, "io_floor", floor)
    monkeypatch.setattr(merge_speed, "run_method", method)
    inputs, outs = tmp_path / "in", tmp_path / "outs"
    assert (
        merge_speed.main(
            [
                "--size-gb",
                "0.0005",
                "--shard-mb",
                "1",
                "--methods",
                "linear",
                "--dir",
                str(inputs),
                "--out-dir",
                str(outs),
                "--keep",
            ]
        )
        == 0
    )
    assert set(seen["floor"]) == {outs} and len(seen["floor"]) == 6  # 2 and 3 inputs, best of three each
    assert seen["merge"] == [outs]
    assert (inputs / "base").is_dir() and not list(outs.iterdir())  # inputs kept, nothing left in --out-dir
    assert re.search(r"^linear +numba +[\d.]+ +[\d.]+ ", capsys.readouterr().out, re.M)
