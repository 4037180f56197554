"""What a release carries besides the code: the Apache-2.0 ``LICENSE`` that pyproject names, a changelog with
an entry for this version, and the version in one place (``prom_reward.__version__``, which pyproject reads).
That the wheel holds the license and this version: ``tests/packaging/test_distribution.py``."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import prom_reward

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
APACHE_2_MD5 = "86d3f3a95c324c9479bd8986968f4327"  # the unmodified Apache License 2.0 text, as apache.org gives it


def test_the_license_is_the_apache_2_text_pyproject_names():
    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.md5(text).hexdigest() == APACHE_2_MD5
    assert text.lstrip().startswith(b"Apache License\n") and b"Version 2.0, January 2004" in text
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}


def test_the_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "prom_reward.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", prom_reward.__version__)
    init = (REPO / "prom_reward" / "__init__.py").read_text()
    assert init.count(prom_reward.__version__) == 1  # written once, as a literal setuptools reads without importing


def test_the_changelog_has_this_version_and_an_unreleased_section():
    headings = re.findall(r"^## (.+)$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == "Unreleased"
    assert prom_reward.__version__ in headings
