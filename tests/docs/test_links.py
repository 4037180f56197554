"""Every relative link in the README and the docs leads somewhere: the file exists and, for a link to a
heading (``file.md#anchor``), the heading exists under GitHub's anchor rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "train_judge" / "README.md",
        ROOT / "benchmarks" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        (
            "The job engine (`jobs_scale.py`, `vs_prometheus_eval.py`, issue 24)",
            "the-job-engine-jobs_scalepy-vs_prometheus_evalpy-issue-24",
        ),
        ("GPU install: the vLLM range and how it is checked", "gpu-install-the-vllm-range-and-how-it-is-checked"),
        ("Hacking probe", "hacking-probe"),
    ],
)
def test_anchor_rule(heading, expected):
    assert anchor(heading) == expected


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{frag} in {dest.name}")
    return broken


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Real heading\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#real-heading) [web](https://x.org/none) [gone](missing.md) "
        "[bad](other.md#no-such) [self](#top)\n```\n[in code](ignored.md)\n```\n# Top\n"
    )
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#no-such"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)
