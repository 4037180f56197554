"""``make docs``: the documentation site builds with ``mkdocs build --strict`` (mkdocs.yml, scripts/docs_site.py)
into a temporary folder, every internal link of every generated page resolves (read with the stdlib's
``html.parser``: the file exists inside the site and a ``#fragment`` is an id on it), and headless Chromium
(Debian's ``chromium``, the report's browser helper) renders the home page, the API reference, the formats and
the settings pages: their headings, every public API name and the generated tables' rows in its DOM, and ink on
the screenshot. Fails, never skips, without mkdocs or Chromium."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

import prom_reward
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.integrations.settings import ENV_PREFIX, setting_names
from tests.report.test_report_browser import chromium

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)  # http(s):, mailto:, data:, javascript:, //host


class PageLinks(HTMLParser):
    """The ids (``id`` and ``name`` attributes) a page defines and the references it makes (``href`` and
    ``src``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)
            elif key in ("href", "src"):
                self.refs.append(value)


def read_page(path: Path) -> PageLinks:
    parser = PageLinks()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def broken_links(site: Path) -> tuple[list[str], int]:
    """Every internal reference of every HTML page of ``site`` that leads nowhere, and how many were checked.
    ``/x`` is relative to the site's root, a folder means its ``index.html``."""
    site = site.resolve()
    pages = {p.resolve(): read_page(p) for p in sorted(site.rglob("*.html"))}
    broken, checked = [], 0
    for page, links in pages.items():
        for ref in links.refs:
            if EXTERNAL.match(ref):
                continue
            checked += 1
            path, _, frag = ref.partition("#")
            path = unquote(path.split("?", 1)[0])
            dest = (site / path.lstrip("/")) if path.startswith("/") else (page.parent / path if path else page)
            dest = dest.resolve()
            if dest.is_dir():
                dest = dest / "index.html"
            where = f"{page.relative_to(site)}: {ref}"
            if not dest.is_relative_to(site) or not dest.is_file():
                broken.append(f"{where}: no file {dest}")
            elif frag and dest.suffix == ".html" and unquote(frag) not in pages[dest].ids:
                broken.append(f"{where}: no id {frag!r} in {dest.relative_to(site)}")
    return broken, checked


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.html").write_text('<h1 id="top">T</h1><a name="old"></a>')
    (tmp_path / "style.css").write_text("")
    (tmp_path / "index.html").write_text(
        '<link href="style.css"><a href="docs/">dir</a><a href="docs/index.html#top">ok</a>'
        '<a href="/docs/index.html#old">root</a><a href="#here">self</a><p id="here"></p>'
        '<a href="https://x.org/none">web</a><a href="mailto:a@b">mail</a><img src="data:image/png;base64,AA">'
        '<a href="gone.html">gone</a><a href="docs/index.html#nope">bad anchor</a><script src="../out.js"></script>'
    )
    broken, checked = broken_links(tmp_path)
    assert [b.split(": ")[1] for b in broken] == ["gone.html", "docs/index.html#nope", "../out.js"]
    assert checked == 8


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml", "--site-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.integration  # builds the site (~10 s)
def test_every_page_is_built_and_every_internal_link_resolves(site):
    pages = {str(p.relative_to(site)) for p in site.rglob("*.html")}
    expected = {"index.html", "api.html", "benchmarks/index.html", "train_judge/index.html"}
    expected |= {str(p.relative_to(ROOT).with_suffix(".html")) for p in (ROOT / "docs").glob("*.md")}
    assert expected <= pages, sorted(expected - pages)
    broken, checked = broken_links(site)
    assert broken == []
    assert checked > 50 * len(pages)  # the nav, the tables of contents and the pages' own links were all read


def rows(dom: str) -> list[str]:
    return re.findall(r"<tr>.*?</tr>", dom, re.S)


PAGES = [
    ("index.html", "prom-reward", [">API reference<", 'href="docs/formats.html"', ">Plug it into GRPO<"]),
    ("api.html", "API reference", [f'id="prom_reward.{name}"' for name in prom_reward.__all__]),
    ("docs/formats.html", "Judge formats", [f"<td><code>{name}</code>" for name in sorted(JUDGE_FORMATS)]),
    ("docs/openrlhf.html", "OpenRLHF: the judge as a reward", [f"<code>{ENV_PREFIX}SERVER</code>"]),
]


@pytest.mark.integration  # headless Chromium
@pytest.mark.parametrize(("page", "heading", "expected"), PAGES, ids=[p[0] for p in PAGES])
def test_pages_render_in_headless_chromium(site, tmp_path, page, heading, expected):
    from PIL import Image

    dom = chromium(tmp_path, "--virtual-time-budget=2000", "--dump-dom", (site / page).as_uri()).stdout
    assert re.search(rf"<h1 id=\"[^\"]+\">{re.escape(heading)}", dom), dom[:2000]
    missing = [text for text in expected if text not in dom]
    assert missing == []
    if page == "api.html":  # every public name with its docstring rendered, not just a heading
        assert dom.count('class="doc doc-contents') >= len(prom_reward.__all__)
    if page == "docs/openrlhf.html":  # the settings table: a row per setting, from the code
        table = [r for r in rows(dom) if re.search(r"<td><code>(?:RewardSettings|RewardConfig)\.", r)]
        assert len(table) == len(setting_names())
        assert all(f"<td><code>{name}</code></td>" in "".join(table) for name in setting_names())
    shot = tmp_path / "page.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", (site / page).as_uri())
    image = Image.open(shot).convert("L")
    assert image.size == (1200, 900)
    dark = sum(1 for v in image.tobytes() if v < 100)
    assert dark > 2000, dark  # text painted, not a blank or unstyled-error page


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
IMPORT = re.compile(r"from (prom_reward[\w.]*) import ([\w, ]+)")
VERL_ENTRY = re.compile(r"custom_reward_function\.path=pkg://([\w.]+).*?custom_reward_function\.name=(\w+)", re.S)


def tour_calls(root: Path = ROOT) -> set[str]:
    """The API reference ids of what the README's and docs' tour calls: each function or class imported from
    ``prom_reward`` (in a code block or the text), each method called on such a class or on an instance
    assigned from one (``__call__`` for the instance called or given to a trainer as ``reward_funcs``), and verl's
    entry point named in its config."""
    import ast

    experimental = importlib.import_module("prom_reward.experimental")
    calls: set[str] = set()
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        names: dict[str, str] = {}  # a name the page imports -> its id on the site
        for module, listed in IMPORT.findall(text):
            for name in (n.strip() for n in listed.split(",") if n.strip()):
                public = "prom_reward" if name in prom_reward.__all__ else None
                public = public or ("prom_reward.experimental" if name in experimental.__all__ else module)
                names[name] = f"{public}.{name}"
        calls |= set(names.values())
        calls |= {f"{module}.{name}" for module, name in VERL_ENTRY.findall(text)}
        trees = [ast.parse(block) for block in PYTHON_BLOCK.findall(text)]
        nodes = [node for tree in trees for node in ast.walk(tree)]
        instances = {  # x = Class(...)
            target.id: names[node.value.func.id]
            for node in nodes
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in names
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner = instances.get(func.value.id) or names.get(func.value.id)
                if owner is not None:
                    calls.add(f"{owner}.{func.attr}")
            elif isinstance(func, ast.Name) and func.id in instances:
                calls.add(f"{instances[func.id]}.__call__")
            for keyword in node.keywords:  # reward_funcs=reward, reward_funcs=[reward]: the trainer calls it
                given = keyword.value.elts if isinstance(keyword.value, ast.List) else [keyword.value]
                if keyword.arg == "reward_funcs":
                    calls |= {
                        f"{instances[g.id]}.__call__" for g in given if isinstance(g, ast.Name) and g.id in instances
                    }
    return calls


def test_the_tour_calls_are_read_from_its_code():
    calls = tour_calls()
    expected = {
        "prom_reward.PrometheusJudge.grade",
        "prom_reward.PrometheusJudge.compare",
        "prom_reward.PrometheusJudge.compare_by_grades",
        "prom_reward.PrometheusJudge.grade_items",
        "prom_reward.PrometheusJudge.close",
        "prom_reward.PrometheusReward.__call__",
        "prom_reward.AsyncPrometheusReward.__call__",
        "prom_reward.experimental.CascadeJudge.grade",
        "prom_reward.integrations.verl.compute_score",
        "prom_reward.integrations.openrlhf_func.reward_func",
        "prom_reward.integrations.trl_async.use_judged_loop",
    }
    assert expected <= calls, sorted(expected - calls)


@pytest.mark.integration  # builds the site (the module's one build, shared)
def test_the_api_reference_documents_every_call_of_the_tour(site):
    """Each name and method the tour calls, inherited ones (``PrometheusJudge.grade`` is ``Judge``'s) and
    ``PrometheusReward.__call__`` included, has its heading on the API page and its docstring under it."""
    page = (site / "api.html").read_text(encoding="utf-8")
    missing, bare = [], []
    for call in sorted(tour_calls()):
        at = page.find(f'id="{call}"')
        if at < 0:
            missing.append(call)
            continue
        end = page.find('class="doc doc-heading"', page.find(">", at))  # the next entry's heading
        entry = page[at : end if end > 0 else len(page)]
        if "<p>" not in entry:  # the docstring's paragraphs (the signature is a <pre>)
            bare.append(call)
    assert (missing, bare) == ([], [])
