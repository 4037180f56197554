"""Every ``python -m`` entry point of prom_reward and train_judge (each module with an ``if __name__ ==
"__main__":`` block, found in the source): ``--help`` prints its usage (no reST markup) and exits 0 at once,
building and writing nothing; an unknown flag exits 2 (issue 44: ``python -m train_judge.pocket_judge --help`` ran the
build). The modules run in one child process (``runpy``, as ``python -m`` runs them), to import the stack
once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("prom_reward", "train_judge")
MAIN = 'if __name__ == "__main__":'

DRIVER = """
import contextlib, io, json, runpy, sys, time
out = {}
for module in sys.argv[1:]:
    for flag in ("--help", "--bogus"):
        sys.argv = [module, flag]
        text, start, code = io.StringIO(), time.monotonic(), 0
        try:
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out[f"{module} {flag}"] = [code, round(time.monotonic() - start, 1), text.getvalue()]
        print(module, flag, code, file=sys.__stderr__, flush=True)  # where a hang is, on a timeout
print(json.dumps(out))
"""


def entry_points() -> list[str]:
    """The modules ``python -m`` runs: each source file with a ``__main__`` block (``pkg/__main__.py``: ``pkg``)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if MAIN in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return found


def test_the_entry_points_are_found():
    found = entry_points()
    assert {"train_judge.pocket_judge", "train_judge.merge", "prom_reward.cli", "prom_reward.local.models"} <= set(
        found
    )


def test_every_entry_point_answers_help_and_refuses_an_unknown_flag(tmp_path):
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PROM_REWARD_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    modules = entry_points()
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, *modules], capture_output=True, text=True, timeout=300, cwd=work, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.splitlines()[-1])
    for module in modules:
        code, seconds, text = results[f"{module} --help"]
        assert code == 0 and "usage:" in text and seconds < 30, (module, code, seconds, text[-600:])
        assert "``" not in text and ":class:`" not in text, (module, text)  # plain help, as prom-reward's
        code, _, text = results[f"{module} --bogus"]
        assert code == 2 and "error: " in text, (module, code, text[-600:])  # the flag, or what is missing
    assert not cache.exists() or not any(cache.iterdir()), f"built: {sorted(cache.rglob('*'))[:5]}"
    assert not any(work.iterdir()), f"written: {sorted(work.rglob('*'))[:5]}"
