"""The public API: every name in ``prom_reward.__all__`` is importable from the package, what a user must catch
or configure on a reward path (the errors, the outage policy, the failure value) is among them, and every
``from prom_reward... import X`` the README and the docs show imports (what they import from ``prom_reward``
itself is in ``__all__``)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import prom_reward


def test_every_exported_name_is_there():
    missing = [name for name in prom_reward.__all__ if not hasattr(prom_reward, name)]
    assert missing == [] and len(set(prom_reward.__all__)) == len(prom_reward.__all__)


ROOT = Path(__file__).resolve().parents[2]
OPTIONAL_PACKAGES = (
    "verifiers openrlhf verl ray datasets trl peft accelerate deepspeed vllm torch transformers starlette uvicorn "
    "pydantic scipy flow_judge rewardbench pandas"
).split()
"""What no extra or only an extra installs: the peer frameworks, the engines, the server and training stacks."""


def test_star_import_works_without_the_optional_packages():
    """``from prom_reward import *`` where none of ``OPTIONAL_PACKAGES`` can be imported (None in ``sys.modules``:
    an import raises ``ModuleNotFoundError``, ``find_spec`` finds nothing): every exported name but the verifiers
    judge, which verifiers' plugin loader finds in ``__all__`` where verifiers is installed."""
    code = (
        f"import sys, json\nfor m in {OPTIONAL_PACKAGES!r}: sys.modules[m] = None\n"
        "from prom_reward import *\nimport prom_reward\n"
        "print(json.dumps([prom_reward.__all__, sorted(n for n in globals() if n in prom_reward.__all__)]))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    exported, imported = json.loads(run.stdout)
    assert exported == imported == sorted(set(prom_reward.__all__) - {"PrometheusVerifiersJudge"})
    assert "PrometheusVerifiersJudge" in prom_reward.__all__  # installed here (make setup): the plugin is found


def test_what_a_reward_path_raises_or_takes_is_exported():
    wanted = {"JudgeUnavailableError", "JudgeConfigError", "ConfigError", "InputError", "PromRewardError"}
    wanted |= {"OutagePolicy", "RewardConfig", "JudgeFailure", "Judge", "PrometheusReward", "PrometheusJudge"}
    assert wanted <= set(prom_reward.__all__)
    assert issubclass(prom_reward.JudgeConfigError, prom_reward.ConfigError)
    assert issubclass(prom_reward.JudgeUnavailableError, prom_reward.PromRewardError)
    assert isinstance(prom_reward.PrometheusJudge(backend="scripted", outputs=[]), prom_reward.Judge)


def test_experimental_features_are_imported_from_their_package_only():
    import prom_reward.experimental as experimental

    assert {"CascadeJudge", "calibrated_judge", "BaseModelReader", "CascadeConfig", "route"} <= set(
        experimental.__all__
    )
    assert [name for name in experimental.__all__ if not hasattr(experimental, name)] == []
    assert set(experimental.__all__).isdisjoint(prom_reward.__all__) and not hasattr(prom_reward, "CascadeJudge")


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "rlhf_examples").rglob("*.md"))]
_FROM = re.compile(r"(?:^|`)[ \t>]*from (prom_reward[\w.]*) import (\([^)]*\)|[^\n#`]+)", re.M)
_IMPORT = re.compile(r"(?:^|`)[ \t>]*import (prom_reward[\w.]*)", re.M)


def doc_imports() -> list[tuple[str, str, str | None]]:
    """(doc, module, name) for each ``from prom_reward... import name`` a doc shows, in a code block or inline
    code; name None for ``import prom_reward...``."""
    found: list[tuple[str, str, str | None]] = []
    for doc in DOCS:
        text, where = doc.read_text(), str(doc.relative_to(ROOT))
        for module, names in _FROM.findall(text):
            for name in names.strip("()").split(","):
                if name.strip():
                    found.append((where, module, name.split(" as ")[0].strip()))
        found += [(where, module, None) for module in _IMPORT.findall(text)]
    return found


def test_the_doc_imports_are_found() -> None:
    found = doc_imports()
    assert ("README.md", "prom_reward", "PrometheusJudge") in found and (
        "README.md",
        "prom_reward",
        "GradeItem",
    ) in found
    assert ("docs/openrlhf.md", "prom_reward.integrations.openrlhf_func", "reward_func") in found  # inline code


@pytest.mark.parametrize("doc, module, name", doc_imports(), ids=lambda x: str(x))
def test_every_import_the_docs_show_works(doc: str, module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    assert name is None or hasattr(imported, name), f"{doc}: `from {module} import {name}`: {module} has no {name}"
    if module == "prom_reward" and name is not None:
        assert name in prom_reward.__all__, f"{doc} imports {name} from prom_reward, which does not export it"


def test_the_item_types_are_public_and_all_is_sorted() -> None:
    assert {"GradeItem", "PairItem", "Judge", "Grade", "Verdict", "Rubric", "SamplingConfig"} <= set(
        prom_reward.__all__
    )
    assert prom_reward.__all__ == sorted(prom_reward.__all__)
    item = prom_reward.GradeItem("q", "r", "helpfulness")
    assert isinstance(item.rubric, prom_reward.Rubric)
