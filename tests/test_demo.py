"""``make demo`` (``python -m prom_reward.demo``): the default judge is the shipped pocket judge on the
real vLLM engine; it grades the sample rollouts and writes its own verdicts (nothing forced)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prom_reward.demo import load_sample_rollouts, main


def test_demo_grades_the_samples_with_the_pocket_judge(capsys: pytest.CaptureFixture[str],
                                                       smollm2_dir: Path) -> None:
    main([])
    out = capsys.readouterr().out
    rows = load_sample_rollouts()
    assert "judge: pocket-judge" in out
    scored = re.findall(r"^\s*\d+\s+\S+\s+(\d\.\d|None)\s+(\d\.\d\d|-)\s+(\d+)\s", out, flags=re.M)
    assert len(scored) == len(rows)
    assert sum(s != "None" for s, _, _ in scored) >= len(rows) - 1  # at T=1 one may fail after retries
    assert all(forced == "0" for _, _, forced in scored)
    assert re.search(rf"{len(rows)} judgments in [\d.]+s", out) and "forced verdicts 0" in out
    assert out.count("feedback: ") == len(rows) and out.count("feedback: -") <= 1
