"""The README's API tour runs as written (real SmolLM2 on the CPU vLLM engine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.judges import judge_by_rank

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_code() -> str:
    text = README.read_text()
    block = re.search(r"<!-- tour:start -->\s*```python\n(.*?)```\s*<!-- tour:end -->", text, re.S)
    assert block, "README lost its tour block markers"
    return block.group(1)


def items_code() -> str:
    block = re.search(r"<!-- items:start -->\s*```python\n(.*?)```\s*<!-- items:end -->", README.read_text(), re.S)
    assert block, "README lost its items block markers"
    return block.group(1)


def test_the_items_example_runs_on_a_judge():
    """The README's item example, run on a scripted judge that ranks responses by their first word."""
    judge = judge_by_rank({"4": 5, "9": 1, "Hello!": 4, "Go": 1})
    scope = {"judge": judge}
    exec(compile(items_code(), "README-items", "exec"), scope)
    assert [g.score for g in scope["grades"]] == [5.0, 1.0]
    (v,) = scope["verdicts"]
    assert v.winner == "A" and v.swap_agreement is True


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
    score, expected = (float(x) for x in grade[0].split()[:2])
    assert 1.0 <= expected <= 5.0 and abs(expected - score) < 4.0
    probs = {int(k): float(v) for k, v in re.findall(r"([1-5]): ([0-9.e-]+)", grade[0].split("{")[1].split("}")[0])}
    assert set(probs) <= {1, 2, 3, 4, 5} and probs and sum(probs.values()) == pytest.approx(1.0, abs=0.02)

    def value(word: str) -> float | None:
        return None if word == "None" else float(word)

    # compare(swap=True): a winner only where both orders agree; P(A) a probability
    winner, p_a, agreement, tie = lines[lines.index(grade[0]) + 1].split()
    assert winner in {"A", "B", "None"} and tie in {"True", "False"} and agreement in {"True", "False", "None"}
    assert p_a == "None" or 0.0 <= float(p_a) <= 1.0
    if winner != "None":
        assert tie == "False" and agreement != "False"
    if agreement == "False":
        assert winner == "None" and tie == "True"
    # compare_by_grades: the higher grade wins; a tie is re-sampled at most 3 rounds
    direct = lines[lines.index(grade[0]) + 2]
    d_winner, rounds = direct.split()[:2]
    a, b = (value(x) for x in re.search(r"\[(.*)\]", direct).group(1).split(", "))
    assert 0 <= int(rounds) <= 3
    if d_winner == "A":
        assert a is not None and b is not None and a > b
    elif d_winner == "B":
        assert a is not None and b is not None and a < b
    else:
        assert d_winner == "None" and (a is None or b is None or a == b)
    items = int(re.search(r"items=(\d+)", stats[0]).group(1))
    assert items >= 5  # 1 graded + 2 orders compared + 2 graded for Direct2Pair (+ tie rounds)
