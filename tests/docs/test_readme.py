"""The README's API tour runs as written (real SmolLM2 on the CPU vLLM engine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_code() -> str:
    text = README.read_text()
    block = re.search(r"<!-- tour:start -->\s*```python\n(.*?)```\s*<!-- tour:end -->", text, re.S)
    assert block, "README lost its tour block markers"
    return block.group(1)


def test_tour_is_short_and_complete():
    code = tour_code()
    assert len(code.strip().splitlines()) <= 22
    compile(code, "README-tour", "exec")


@pytest.mark.integration
@pytest.mark.smollm2
def test_tour_runs_as_written(tmp_path, smollm2_dir):
    script = tmp_path / "tour.py"
    script.write_text(tour_code())
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_LOGGING_LEVEL="ERROR")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # vLLM may still print warnings to stdout: pick out the tour's own four lines
    lines = proc.stdout.strip().splitlines()
    grade = [ln for ln in lines if re.match(r"^[1-5]\.0 [0-9.]+ \{", ln)]
    stats = [ln for ln in lines if ln.startswith("JudgeStats(")]
    assert len(grade) == 1 and len(stats) == 1, proc.stdout[-3000:]
    pair = lines[lines.index(grade[0]) + 1].split()
    assert pair[0] in {"A", "B", "None"}, pair
    direct = lines[lines.index(grade[0]) + 2].split()
    assert direct[0] in {"A", "B", "None"} and direct[1].isdigit(), direct
    items = int(re.search(r"items=(\d+)", stats[0]).group(1))
    assert items >= 5  # 1 graded + 2 orders compared + 2 graded for Direct2Pair (+ tie rounds)
