"""The YAML judge format files of the tests in this folder: Prometheus 2 re-stated in YAML, a small format of
its own (1..3 grades after ``Score: ``, pairwise ``Score: a|b``), and helpers writing and editing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from prom_reward.format.formats.prometheus2 import MARKERS
from prom_reward.format.templates import TEMPLATES

_OPEN, _CLOSE = r"""[(\["'*]*""", r"""[)\]"'*]*[.!]?"""
_MARKER = r"\[(?i:result)\]?:?\s*"


def _ours(template: str) -> str:
    """A Prometheus template in the YAML format's field names."""
    for old, new in [("{reference_answer}", "{reference}"), ("{response_A}", "{response_a}")]:
        template = template.replace(old, new)
    return template.replace("{response_B}", "{response_b}")


def prometheus_spec() -> dict[str, Any]:
    """Prometheus 2's prompts and verdicts as a YAML format file's content."""
    absolute = {k: _ours(TEMPLATES[k]).replace("{rubric}", "[{criteria}]\n{rubric}") for k in TEMPLATES}
    relative = {k: _ours(TEMPLATES[k]).replace("{rubric}", "[{criteria}]") for k in TEMPLATES}
    return {
        "name": "prometheus2-yaml",
        "scale": [1, 2, 3, 4, 5],
        "force_prefix": " [RESULT] ",
        "markers": list(MARKERS),
        "rubric_item": "Score {score}: {description}",
        "tasks": {
            "absolute": {
                "system": TEMPLATES["ABS_SYSTEM_PROMPT"],
                "user": absolute["ABSOLUTE_PROMPT"],
                "user_no_reference": absolute["ABSOLUTE_PROMPT_WO_REF"],
                "verdict": {"pattern": _MARKER + _OPEN + r"(?P<verdict>[1-5])(?:\s*/\s*5)?" + _CLOSE},
            },
            "relative": {
                "system": TEMPLATES["REL_SYSTEM_PROMPT"],
                "user": relative["RELATIVE_PROMPT"],
                "user_no_reference": relative["RELATIVE_PROMPT_WO_REF"],
                "verdict": {"pattern": _MARKER + _OPEN + r"(?:Response:?\s*)?(?P<verdict>[AB])" + _CLOSE},
            },
        },
    }


def tiny_spec() -> dict[str, Any]:
    """A small format of its own: 1..3 grades after ``Score: ``, pairwise ``Score: a|b``."""
    return {
        "name": "tiny",
        "scale": [1, 2, 3],
        "force_prefix": "Score: ",
        "markers": ["<q>", "</q>", "###Answer"],
        "tasks": {
            "absolute": {
                "system": "Grade 1-3 {{strictly}}.",
                "user": "<q>{instruction}</q>\n###Answer\n{response}\n{rubric}\nRef: {reference}",
                "reference_missing": "(none)",
                "verdict": {"pattern": r"Score: (?P<verdict>\d+)"},
            },
            "relative": {
                "user": "{instruction}\nA: {response_a}\nB: {response_b}\n[{criteria}]",
                "verdict": {"pattern": r"Score: (?P<verdict>[ab])", "map": {"a": "A", "b": "B"}, "match": "only"},
                "verdict_tokens": ["a", "b"],
            },
        },
    }


def dump(path: Path, spec: Any) -> str:
    """``spec`` written to ``path`` as YAML; the path as a string."""
    path.write_text(yaml.safe_dump(spec, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return str(path)


def set_key(spec: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``spec`` with the key at the dotted path set to ``value`` (``DROP``: removed)."""
    *path, last = dotted.split(".")
    node = spec
    for key in path:
        node = node[key]
    if value is DROP:
        del node[last]
    else:
        node[last] = value
    return spec


DROP = object()
A, R = "tasks.absolute.", "tasks.relative."
