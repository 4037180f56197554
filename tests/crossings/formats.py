"""The format axis of the crossing matrix, read from the registry: every format ``JUDGE_FORMATS`` registers and a
YAML format (``tests/format/yaml_specs.py`` ``tiny_spec``), each with a rubric that fits its scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import prom_reward.format.formats  # noqa: F401 (registers the formats)
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, get_judge_format
from tests.format.yaml_specs import dump, tiny_spec

YAML = "tiny.yaml"
"""The YAML format's cell name; the file is written by ``format_arg``."""
FORMATS: tuple[str, ...] = (*JUDGE_FORMATS, YAML)


def format_arg(name: str, folder: Path) -> str:
    """What ``--format`` / ``format=`` takes for a cell's format: its name, or the YAML file written to ``folder``."""
    if name != YAML:
        return name
    path = folder / YAML
    if not path.exists():
        dump(path, tiny_spec())
    return str(path)


def judge_format(name: str, folder: Path) -> JudgeFormat:
    return get_judge_format(format_arg(name, folder))


def rubric_for(fmt: JudgeFormat) -> dict[str, Any]:
    """A rubric with one description per score of ``fmt``'s scale (any for a pairwise-only format: it has no slot)."""
    scale = fmt.scale or (1, 2, 3, 4, 5)
    return {"criteria": "Is the answer right?", "descriptions": [f"right to degree {s}" for s in scale]}


def supports(fmt: JudgeFormat, task: str) -> tuple[str, ...]:
    """The registered formats that judge ``task`` (what a refusal may list)."""
    return tuple(n for n in JUDGE_FORMATS if task in JUDGE_FORMATS.get(n).tasks)
