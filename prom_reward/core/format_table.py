"""The table of judge formats in docs/formats.md, generated from the registered formats and the presets (kept
equal to the page by ``tests/core/test_format_table.py``)."""

from __future__ import annotations

import prom_reward.format.formats  # noqa: F401  (registers the built-in formats)
from prom_reward.core.presets import PRESETS
from prom_reward.format.judge_format import DEFAULT_FORMAT, JUDGE_FORMATS, JudgeFormat, get_judge_format

HEADER = "| name | preset models | tasks | scale | verdicts | forced after |\n|---|---|---|---|---|---|"


def _models(name: str) -> str:
    """The model ids of the presets in format ``name``, each once."""
    models = dict.fromkeys(PRESETS.get(p).model for p in PRESETS if PRESETS.get(p).format == name)
    return ", ".join(f"`{m}`" for m in models) or "none (name it: `--format`)"


def _scale(fmt: JudgeFormat) -> str:
    if not fmt.scale:
        return "none"
    if len(fmt.scale) == 2:
        return f"{fmt.scale[0]}, {fmt.scale[1]}"
    return f"{fmt.scale[0]}..{fmt.scale[-1]}"


def _labels(fmt: JudgeFormat) -> str:
    """The verdict labels of each task the format judges (absolute first), a range when more than two."""
    parts = []
    for task in sorted(fmt.tasks):
        labels = [f"`{label}`" for label in fmt.verdict_labels(task)]
        parts.append(f"{labels[0]}..{labels[-1]}" if len(labels) > 2 else ", ".join(labels))
    return "; ".join(parts)


def formats_table() -> str:
    """The markdown table of the built-in judge formats."""
    names = sorted(JUDGE_FORMATS, key=lambda n: (n != DEFAULT_FORMAT, n))
    rows = []
    for name in names:
        fmt = get_judge_format(name)
        shown = f"`{name}` (default)" if name == DEFAULT_FORMAT else f"`{name}`"
        forced = "not one token: never forced" if fmt.force_prefix is None else f'`"{fmt.force_prefix}"`'
        cells = [shown, _models(name), ", ".join(sorted(fmt.tasks)), _scale(fmt), _labels(fmt), forced]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([HEADER, *rows])
