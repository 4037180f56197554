"""The mkdocs hook of ``make docs`` (mkdocs.yml): what the documentation site is made of.

- **Pages**: the repository's own markdown at its repository paths, so every relative link GitHub follows works
  unchanged on the site: ``README.md`` (the home page), every ``docs/**/*.md``, and every file those pages
  link to, followed link by link (``benchmarks/README.md``, its plots, ``train_judge/README.md`` ...).
- **API reference** (``api.md``): one mkdocstrings block per name of ``prom_reward.__all__``, plus
  ``prom_reward.experimental`` when that module exists, then ``MODULE_API`` (what the docs have users import from
  a module: the frameworks' entry points, the serving helpers), each rendered from its docstrings, inherited
  methods and ``__call__`` included (mkdocs.yml). ``WrappedForms`` documents ``name = sync_method(aname)`` (and
  ``threaded_method``) as the method it is at run time.
- **Generated tables**: a page's ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->`` region is replaced by the
  output of the table's one generator (``TABLES``: the settings and the formats tables), so the site shows
  the code's tables even before a test has caught a stale page (other regions, e.g. the README's ``tour``, stay).
- **Doctests in docstrings** (``DoctestBlocks``, a griffe extension named in mkdocs.yml): a ``>>>`` block
  outside an ``Example:`` section (which mkdocstrings renders as code itself) is fenced as code, so markdown
  does not read ``x[1][:3]`` as a link.
- **Navigation**: home, API reference, the docs pages in file order (titled by their first heading), then the
  other linked pages.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from griffe import Class, Docstring, Extension, Function
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
HOME = "README.md"
API_PAGE = "api.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
REGION = re.compile(r"(<!-- (\w+):start -->\n)(.*?)(\n<!-- \2:end -->)", re.S)


def _settings_table() -> str:
    from prom_reward.integrations.settings import settings_table

    return settings_table()


def _formats_table() -> str:
    from prom_reward.core.presets import formats_table

    return formats_table()


MODULE_API: dict[str, list[str]] = {
    "prom_reward.integrations.verl": ["compute_score", "compute_score_sync", "configure", "reset"],
    "prom_reward.integrations.openrlhf_func": ["reward_func", "reward_func_path", "configure", "reset"],
    "prom_reward.integrations.trl_async": ["use_judged_loop"],
    "prom_reward.integrations.verifiers_judge": ["PrometheusVerifiersJudgeConfig"],
    "prom_reward.backends.servers": ["JudgeServers", "ServeConfig"],
    "prom_reward.backends.vllm_options": ["VLLMOptions"],
    "prom_reward.backends.vllm_engine": ["VLLMEngine"],
}
"""Module -> the names the docs import from it (not in ``prom_reward.__all__``), in the API reference's last part."""
WRAPPERS = {"sync_method": "sync", "threaded_method": "async"}
"""``backends.bridge``'s method wrappers -> the kind of the method they make."""

TABLES: dict[str, Callable[[], str]] = {"settings": _settings_table, "formats": _formats_table}
"""Marker name -> the one generator of that table (the same function the tests compare the page with)."""


def site_sources(root: Path = ROOT) -> list[str]:
    """The repository paths of the site's files: the home page, ``docs/**/*.md``, and what they link to, in
    that order (each once). A link outside the repository or to a missing file is left for mkdocs to report."""
    start = [HOME, *sorted(str(p.relative_to(root)) for p in (root / "docs").rglob("*.md"))]
    found = dict.fromkeys(start)
    queue = list(start)
    while queue:
        page = queue.pop(0)
        if not page.endswith(".md"):
            continue
        for target in LINK.findall(FENCE.sub("", (root / page).read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            dest = (root / page).parent / target.partition("#")[0]
            try:
                rel = str(dest.resolve().relative_to(root))
            except ValueError:
                continue
            if dest.is_file() and rel not in found:
                found[rel] = None
                queue.append(rel)
    return list(found)


def api_page() -> str:
    """The API reference's markdown: the public names in ``__all__`` order, then ``prom_reward.experimental``."""
    import prom_reward

    lines = [
        "# API reference",
        "",
        "The public API: every name of `prom_reward.__all__` (import it from `prom_reward`), rendered from its",
        "docstrings. What each part of the library does is in [the architecture page](docs/architecture.md).",
        "",
    ]
    lines += [f"::: prom_reward.{name}\n" for name in prom_reward.__all__]
    if importlib.util.find_spec("prom_reward.experimental") is not None:
        experimental = importlib.import_module("prom_reward.experimental")
        lines += ["## prom_reward.experimental", ""]
        names = getattr(experimental, "__all__", None)
        lines += [f"::: prom_reward.experimental.{n}\n" for n in names] if names else ["::: prom_reward.experimental\n"]
    for module, members in MODULE_API.items():
        lines += [f"## {module}", ""] + [f"::: {module}.{n}\n" for n in members]
    return "\n".join(lines)


def fence_doctests(text: str) -> str:
    """``text`` with each ``>>>`` block (up to the next blank line) outside an ``Example(s):`` section fenced as
    ``pycon`` code."""
    out: list[str] = []
    block: str | None = None  # the open fence's indentation
    section: int | None = None  # the indentation of the Example(s): title we are under
    for line in text.split("\n"):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if section is not None and stripped and indent <= section:
            section = None
        if re.fullmatch(r"Examples?:", stripped.rstrip()):
            section = indent
        if block is not None and not stripped:
            out.append(block + "```")
            block = None
        elif block is None and section is None and stripped.startswith(">>>"):
            block = line[:indent]
            out.append(block + "```pycon")
        out.append(line)
    if block is not None:
        out.append(block + "```")
    return "\n".join(out)


class DoctestBlocks(Extension):
    """Griffe extension: every loaded object's docstring gets ``fence_doctests``."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)


def _wrapped_forms(node: ast.ClassDef) -> list[tuple[str, str, str, int]]:
    """``(name, kind, wrapped, lineno)`` of each ``name = sync_method(wrapped)`` (or ``threaded_method``) in the
    class body, one per name of a tuple assignment too (``a, b = sync_method(aa), sync_method(ab)``)."""
    found = []
    for stmt in node.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0], stmt.value
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(target.elts, value.elts, strict=False))
        for name, call in pairs:
            if (
                isinstance(name, ast.Name)
                and isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in WRAPPERS
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Name)
            ):
                found.append((name.id, WRAPPERS[call.func.id], call.args[0].id, stmt.lineno))
    return found


class WrappedForms(Extension):
    """Griffe extension: a class attribute ``name = sync_method(aname)`` (``threaded_method``: the async form of a
    sync method) becomes the method it is at run time: ``aname``'s parameters and docstring (``functools.wraps``),
    sync (or async), its first line saying which form of ``aname`` it is."""

    def on_class_members(self, *, node: ast.AST | Any, cls: Class, **kwargs: Any) -> None:
        if not isinstance(node, ast.ClassDef):
            return
        for name, kind, aname, lineno in _wrapped_forms(node):
            wrapped = cls.members.get(aname)
            if not isinstance(wrapped, Function):
                continue
            how = "waits for it on the library's event loop" if kind == "sync" else "runs it in a worker thread"
            text = f"The {kind} form of `{aname}`: it {how}." + (
                f"\n\n{wrapped.docstring.value}" if wrapped.docstring else ""
            )
            form = Function(name, lineno=lineno, endlineno=lineno, parameters=wrapped.parameters)
            form.returns = wrapped.returns
            form.labels = (set(wrapped.labels) - {"async"}) | ({"async"} if kind == "async" else set())
            parser = wrapped.docstring.parser if wrapped.docstring else None
            options = wrapped.docstring.parser_options if wrapped.docstring else None
            form.docstring = Docstring(
                fence_doctests(text), lineno=lineno, parent=form, parser=parser, parser_options=options
            )
            if name in cls.members:
                cls.del_member(name)
            cls.set_member(name, form)


def _title(root: Path, page: str) -> str:
    heading = re.search(r"^# (.+)$", FENCE.sub("", (root / page).read_text(encoding="utf-8")), re.M)
    return re.sub(r"[`*]", "", heading.group(1)).strip() if heading else page


def on_config(config: Any) -> Any:
    pages = [p for p in site_sources() if p.endswith(".md") and p != HOME]
    docs = [p for p in pages if p.startswith("docs/")]
    config["nav"] = [
        {"Home": HOME},
        {"API reference": API_PAGE},
        {"Guides": [{_title(ROOT, p): p} for p in docs]},
        {"More": [{_title(ROOT, p): p} for p in pages if p not in docs]},
    ]
    return config


def on_files(files: Files, config: Any) -> Files:
    """The theme's files, then the site's pages at their repository paths (``docs_dir``'s own listing dropped)."""
    docs_dir = Path(config["docs_dir"]).resolve()
    site = Files([f for f in files if not (f.abs_src_path and Path(f.abs_src_path).resolve().is_relative_to(docs_dir))])
    for rel in site_sources():
        site.append(File.generated(config, rel, abs_src_path=str(ROOT / rel)))
    site.append(File.generated(config, API_PAGE, content=api_page()))
    return site


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def render(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(1) + TABLES[name]() + m.group(4) if name in TABLES else m.group(0)

    return REGION.sub(render, markdown)
