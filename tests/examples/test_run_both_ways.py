"""Every example runs as a file (``python rlhf_examples/X.py``, the way TRL's examples are run) and as a module
(``python -m rlhf_examples.X``), with nothing on ``PYTHONPATH`` (issue 35, item 4). Each form's ``--help`` is the
cheap check (it imports the example and its ``common``); a real ``--smoke`` run as a file is
``tests/examples/test_examples.py::test_example_smoke`` (GRPO)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOT_EXAMPLES = ("__init__", "_checkout", "common")
EXAMPLES = sorted(p.stem for p in (REPO / "rlhf_examples").glob("*.py") if p.stem not in NOT_EXAMPLES)


def command(example: str, form: str) -> list[str]:
    """How a user runs ``example``: ``file`` (the file's path; from any folder) or ``module`` (from the root)."""
    if form == "file":
        return [sys.executable, str(REPO / "rlhf_examples" / f"{example}.py")]
    return [sys.executable, "-m", f"rlhf_examples.{example}"]


def test_every_example_is_covered():
    assert EXAMPLES == ["dpo_from_judge", "grpo_prometheus", "online_dpo_prometheus", "rloo_prometheus"]


@pytest.mark.parametrize("form", ["file", "module"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_runs_as_a_file_and_as_a_module(example, form, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [*command(example, form), "--help"],
        cwd=tmp_path if form == "file" else REPO,  # a file runs from anywhere; -m from the repository root
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("usage: ") and "--smoke" in done.stdout and done.stderr == ""
    assert "``" not in done.stdout and ":class:`" not in done.stdout  # the help is plain (issue 44)
