"""Check every vLLM keyword, flag and request field prom-reward uses against a vLLM *source*, without
importing vLLM: a wheel file (``pip download --no-deps vllm==X -d DIR``), a folder holding ``vllm/``, or
(no argument) the installed vLLM.

What it reads (Python's ``ast``), for the tables of ``prom_reward.backends.vllm_options``:

- ``ENGINE_FLAGS`` / ``OTHER_ENGINE_KEYWORDS`` keywords: ``EngineArgs`` fields (``vllm.LLM`` passes its own
  parameters and ``**kwargs`` on to ``EngineArgs``);
- ``ENGINE_FLAGS`` flags and ``--host``/``--port``: the ``add_argument`` literals of
  ``EngineArgs.add_cli_args``, and ``FrontendArgs`` fields (flags by ``--name-with-dashes``); a
  ``--no-X`` flag needs ``--X`` on a bool field (vLLM makes those ``BooleanOptionalAction``);
- ``SERVER_MODULE``: present and runnable (``if __name__ == "__main__"``);
- ``SAMPLING_KEYWORDS``: ``SamplingParams`` fields; ``REQUEST_FIELDS``: the fields of vLLM's request models;
- ``TOKENIZER_MODES``: members of ``TokenizerMode``; ``max_logprobs``: an ``EngineArgs`` field (its
  default is printed).

The introspection test ``tests/backends/test_vllm_api.py`` checks the same against the imported vLLM
(and runs this script on the installed source, so the two methods agree).

Usage:
    $ python scripts/check_vllm_source.py                 # the installed vLLM
    $ pip download --no-deps vllm==0.33.0 -d /tmp/vllm033
    $ python scripts/check_vllm_source.py /tmp/vllm033/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # prom_reward of this checkout

from prom_reward.backends.vllm_options import (  # noqa: E402
    ENGINE_FLAGS,
    OTHER_ENGINE_KEYWORDS,
    REQUEST_FIELDS,
    SAMPLING_KEYWORDS,
    SERVER_MODULE,
    TOKENIZER_MODES,
    VLLMOptions,
)


class Source:
    """The ``vllm/**.py`` files of a wheel or a folder."""

    def __init__(self, path: Path) -> None:
        self.files: dict[str, str] = {}
        if path.is_file():
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    if name.startswith("vllm/") and name.endswith(".py"):
                        self.files[name] = z.read(name).decode("utf-8", "replace")
        else:
            root = path if (path / "vllm").is_dir() else path.parent
            for f in (root / "vllm").rglob("*.py"):
                self.files[f.relative_to(root).as_posix()] = f.read_text(encoding="utf-8", errors="replace")
        if not self.files:
            raise SystemExit(f"{path}: no vllm/*.py files (give a vLLM wheel or a folder that holds vllm/)")
        self._trees: dict[str, ast.Module] = {}

    def tree(self, name: str) -> ast.Module:
        if name not in self._trees:
            self._trees[name] = ast.parse(self.files[name], filename=name)
        return self._trees[name]

    def classes(self, name: str, under: str = "vllm/") -> list[tuple[str, ast.ClassDef]]:
        """Every top-level ``class name`` in files under ``under``."""
        found = []
        for path, text in self.files.items():
            if path.startswith(under) and f"class {name}" in text:
                found += [(path, n) for n in self.tree(path).body if isinstance(n, ast.ClassDef) and n.name == name]
        return found

    def fields(self, name: str, under: str = "vllm/") -> dict[str, str]:
        """Annotated class attributes (name -> annotation source), bases found by name included."""
        out: dict[str, str] = {}
        for _, cls in self.classes(name, under):
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id not in ("object", name):
                    out.update(self.fields(base.id, under))
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    out[node.target.id] = ast.unparse(node.annotation)
        return out

    def method(self, cls: str, method: str, under: str = "vllm/") -> ast.FunctionDef | None:
        for _, c in self.classes(cls, under):
            for node in c.body:
                if isinstance(node, ast.FunctionDef) and node.name == method:
                    return node
        return None

    def default(self, cls: str, field: str, under: str = "vllm/") -> str | None:
        for _, c in self.classes(cls, under):
            for node in c.body:
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.target.id == field
                    and node.value is not None
                ):
                    return ast.unparse(node.value)
        return None


def check(src: Source) -> list[tuple[bool, str, str]]:
    """(ok, what, detail) per check."""
    results: list[tuple[bool, str, str]] = []

    def add(ok: bool, what: str, detail: str = "") -> None:
        results.append((ok, what, detail))

    engine = src.fields("EngineArgs", "vllm/engine/")
    init = src.method("LLM", "__init__", "vllm/entrypoints/llm.py")
    llm_params = {a.arg for a in (init.args.args + init.args.kwonlyargs)} if init else set()
    passes_kwargs = bool(init and init.args.kwarg and "EngineArgs(" in ast.unparse(init))
    add(bool(engine), "EngineArgs fields found", f"{len(engine)} fields")
    add(passes_kwargs, "vllm.LLM passes **kwargs to EngineArgs")
    for key in [k for k, _ in ENGINE_FLAGS] + list(OTHER_ENGINE_KEYWORDS):
        where = "LLM parameter and EngineArgs field" if key in llm_params else "EngineArgs field (LLM **kwargs)"
        add(key in engine, f"vllm.LLM keyword {key}", where if key in engine else "not an EngineArgs field")

    add_cli = src.method("EngineArgs", "add_cli_args", "vllm/engine/")
    literals = set()
    for node in ast.walk(add_cli) if add_cli else []:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            literals |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    frontend_rule = src.method("BaseFrontendArgs", "add_cli_args", "vllm/entrypoints/") or src.method(
        "FrontendArgs", "add_cli_args", "vllm/entrypoints/"
    )
    rule = frontend_rule is not None and ".replace('_', '-')" in ast.unparse(frontend_rule)
    add(rule, "FrontendArgs fields become --flags", "add_cli_args: f\"--{key.replace('_', '-')}\"")
    frontend = {"--" + f.replace("_", "-") for f in src.fields("FrontendArgs", "vllm/entrypoints/")} if rule else set()
    parser_fn = [
        p
        for p, t in src.files.items()
        if p.startswith("vllm/entrypoints/")
        and "def make_arg_parser" in t
        and "AsyncEngineArgs.add_cli_args" in t
        and "FrontendArgs.add_cli_args" in t
    ]
    add(bool(parser_fn), "make_arg_parser adds FrontendArgs and AsyncEngineArgs flags", ", ".join(parser_fn))
    opts = VLLMOptions(max_model_len=4096, enable_prefix_caching=False)
    flags = [a for a in opts.server_args("m") + VLLMOptions().server_args("m") if a.startswith("--")]
    for flag in sorted(set(flags) | {"--host", "--port"}):
        name = flag[5:] if flag.startswith("--no-") else flag[2:]
        base = "--" + name
        ok = base in literals or base in frontend
        detail = "EngineArgs.add_cli_args" if base in literals else "FrontendArgs field" if ok else "no such flag"
        if flag.startswith("--no-"):
            annotation = engine.get(name.replace("-", "_"), "")
            ok = ok and "bool" in annotation
            detail = f"{base} on a {annotation or 'missing'} field"
        add(ok, f"server flag {flag}", detail)

    module = "vllm/" + SERVER_MODULE.split(".", 1)[1].replace(".", "/") + ".py"
    text = src.files.get(module, "")
    add(
        '__name__ == "__main__"' in text or "__name__ == '__main__'" in text,
        f"python -m {SERVER_MODULE}",
        module if text else "missing",
    )

    sampling = src.fields("SamplingParams", "vllm/sampling_params.py")
    for key in SAMPLING_KEYWORDS:
        add(key in sampling, f"SamplingParams keyword {key}", sampling.get(key, "not a field"))

    for model, wanted in REQUEST_FIELDS.items():
        fields = src.fields(model, "vllm/entrypoints/")
        missing = [f for f in wanted if f not in fields]
        add(
            bool(fields) and not missing,
            f"request model {model}",
            f"lacks {missing}" if missing else f"{len(wanted)} fields present" if fields else "class not found",
        )

    modes: list[str] = []
    for node in src.tree("vllm/config/model.py").body if "vllm/config/model.py" in src.files else []:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TokenizerMode" for t in node.targets
        ):
            modes = [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    for mode in TOKENIZER_MODES:
        add(mode in modes, f"tokenizer_mode {mode!r}", f"TokenizerMode: {modes}")
    add(
        "max_logprobs" in engine,
        "max_logprobs (EngineArgs)",
        f"ModelConfig default: {src.default('ModelConfig', 'max_logprobs', 'vllm/config/model.py')}; "
        f"prom-reward passes {VLLMOptions().max_logprobs}",
    )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", nargs="?", help="a vLLM wheel or a folder holding vllm/ (default: the installed vLLM)")
    args = p.parse_args(argv)
    if args.source:
        path = Path(args.source)
    else:
        spec = importlib.util.find_spec("vllm")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("no vLLM installed; give a wheel or a folder")
        path = Path(list(spec.submodule_search_locations)[0]).parent
    src = Source(path)
    version = src.files.get("vllm/_version.py", "")
    results = check(src)
    print(f"vLLM source: {path} ({next((ln for ln in version.splitlines() if 'version' in ln and '=' in ln), '?')})")
    for ok, what, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'}  {what}" + (f"  [{detail}]" if detail else ""))
    failed = sum(not ok for ok, _, _ in results)
    print(f"{len(results)} checks, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
