"""``scripts/docs_site.py``, the mkdocs hook of ``make docs``, without building a site: which files the site is
made of, the API reference page, the generated tables put into their marked regions, and doctests fenced as
code (the build itself, in a browser: tests/docs/test_site.py)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

import prom_reward
from prom_reward.core.presets import formats_table
from prom_reward.integrations.settings import settings_table

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docs_site.py"


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("docs_site", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FENCED = [
    ("Plain text.\n\nMore.", "Plain text.\n\nMore."),
    ("Says.\n\n>>> f(1)[0][:3]\n'abc'\n\nAfter.", "Says.\n\n```pycon\n>>> f(1)[0][:3]\n'abc'\n```\n\nAfter."),
    ("Says.\n\n    >>> x\n    1", "Says.\n\n    ```pycon\n    >>> x\n    1\n    ```"),
    ("Example:\n    >>> x\n    1\n\nText.", "Example:\n    >>> x\n    1\n\nText."),  # mkdocstrings renders it
    (
        "Examples:\n    >>> x\n    1\nNot under it:\n>>> y\n2",
        "Examples:\n    >>> x\n    1\nNot under it:\n```pycon\n>>> y\n2\n```",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FENCED)
def test_doctests_outside_an_example_section_are_fenced(hook, text, expected):
    assert hook.fence_doctests(text) == expected


def test_the_site_is_the_home_the_docs_and_what_they_link_to(hook, tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs" / "spec").mkdir(parents=True)
    (repo / "bench" / "results").mkdir(parents=True)
    (tmp_path / "outside.md").write_text("not in the repository\n")
    (repo / "README.md").write_text("[a](docs/a.md#x) [web](https://x.org/a.md) [me](#top)\n```\n[c](code.md)\n```\n")
    (repo / "docs" / "a.md").write_text("[b](../bench/README.md) [up](../../outside.md) [gone](gone.md)\n")
    (repo / "docs" / "spec" / "z.md").write_text("# unlinked, still a page\n")
    (repo / "bench" / "README.md").write_text("![plot](results/p.png) [a again](../docs/a.md)\n")
    (repo / "bench" / "results" / "p.png").write_bytes(b"png")
    (repo / "code.md").write_text("only linked from a code block\n")
    assert hook.site_sources(repo) == [
        "README.md",
        "docs/a.md",
        "docs/spec/z.md",
        "bench/README.md",
        "bench/results/p.png",
    ]


def test_the_repository_site_holds_the_readmes_the_docs_link(hook):
    sources = hook.site_sources()
    assert sources[0] == "README.md" and {"benchmarks/README.md", "train_judge/README.md"} <= set(sources)
    assert {str(p.relative_to(SCRIPT.parents[1])) for p in (SCRIPT.parents[1] / "docs").glob("*.md")} <= set(sources)


def test_the_generated_regions_are_the_generators_output(hook):
    page = SimpleNamespace(file=SimpleNamespace(src_uri="docs/x.md"))
    stale = (
        "Intro.\n<!-- settings:start -->\n| old |\n<!-- settings:end -->\n"
        "<!-- formats:start -->\nold\n<!-- formats:end -->\n<!-- tour:start -->\nkept\n<!-- tour:end -->\n"
    )
    out = hook.on_page_markdown(stale, page=page, config={}, files=None)
    assert out == (
        f"Intro.\n<!-- settings:start -->\n{settings_table()}\n<!-- settings:end -->\n"
        f"<!-- formats:start -->\n{formats_table()}\n<!-- formats:end -->\n"
        "<!-- tour:start -->\nkept\n<!-- tour:end -->\n"
    )


@pytest.mark.parametrize("experimental", [None, ["Thing", "other"], []])
def test_the_api_page_is_the_public_api(hook, monkeypatch, experimental):
    name = "prom_reward.experimental"
    if experimental is None:
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == name else real(n, *a))
    else:
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        if experimental:
            module.__all__ = experimental
        monkeypatch.setitem(sys.modules, name, module)
    page = hook.api_page()
    blocks = [line for line in page.splitlines() if line.startswith(":::")]
    public = [f"::: prom_reward.{n}" for n in prom_reward.__all__]
    modules = [f"::: {module}.{n}" for module, names in hook.MODULE_API.items() for n in names]  # after, always
    if experimental is None:
        assert blocks == public + modules and "prom_reward.experimental" not in page
    elif experimental:
        assert blocks == public + [f"::: {name}.Thing", f"::: {name}.other"] + modules
    else:
        assert blocks == [*public, f"::: {name}", *modules]
    assert page.startswith("# API reference\n")


def test_the_wrapped_forms_of_a_class_are_found_in_single_and_tuple_assignments(hook):
    import ast

    node = ast.parse(
        "class J:\n"
        "    async def agrade(self): ...\n"
        "    grade, compare = sync_method(agrade), sync_method(acompare)\n"
        "    agen = threaded_method(gen)\n"
        "    other = something(agrade)\n"
    ).body[0]
    assert hook._wrapped_forms(node) == [
        ("grade", "sync", "agrade", 3),
        ("compare", "sync", "acompare", 3),
        ("agen", "async", "gen", 4),
    ]
