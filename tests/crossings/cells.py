"""A cell of the crossing matrix (format x checklist x judge kind) and what an entry point returns for it: the
judge it gets (a format-aware stand-in server, a store in front of it, or the in-process scripted judge), the
rows it judges and the outcome an adapter reports."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat
from tests.crossings.formats import format_arg, judge_format, rubric_for
from tests.judge_answers import on_scale
from tests.judges import judge_by_format

GRADES = {"good": 5, "bad": 1}
"""The stand-in's and the scripted judge's grade (1..5) by a response's first word; anything else 3."""
KINDS = ("server", "store", "scripted")
MODEL = "stand-in-judge"
CHECKLIST = [{"criterion": "Answers the question", "weight": 2}, "Is polite"]
"""The checklist of a checklist cell's rows (docs/checklists.md): each criterion is graded like the response."""


@dataclass
class Cell:
    """One crossing: the format, whether rows carry a checklist, the judge kind, a folder, the stand-in's URL."""

    fmt: str
    checklist: bool
    kind: str
    folder: Path
    url: str

    @property
    def format(self) -> JudgeFormat:
        return judge_format(self.fmt, self.folder)

    @property
    def format_arg(self) -> str:
        return format_arg(self.fmt, self.folder)

    @property
    def rubric(self) -> dict[str, Any]:
        return rubric_for(self.format)

    @property
    def store(self) -> str | None:
        return str(self.folder / "store.sqlite") if self.kind == "store" else None

    def judge_options(self) -> dict[str, Any]:
        """``PrometheusJudge`` options of a server or store cell."""
        options: dict[str, Any] = dict(model=MODEL, backend="openai", base_url=self.url, format=self.format_arg)
        return {**options, "store": self.store} if self.store else options

    def judge(self) -> Any:
        """The cell's judge: over the stand-in server (with the store), or scripted in process."""
        if self.kind == "scripted":
            return judge_by_format(self.format_arg, GRADES)
        from prom_reward.core.judge import PrometheusJudge

        return PrometheusJudge(**self.judge_options(), max_retries=0)

    def cli_judge(self) -> list[str]:
        """The judge flags of a command line (server and store cells)."""
        store = ["--store", self.store] if self.store else []
        return ["--server", self.url, "--model", MODEL, "--format", self.format_arg, *store]

    def grade(self, response: str) -> int:
        """The grade the judge gives ``response``, on the format's scale."""
        return on_scale(self.rank(response), self.format.scale)

    def rank(self, response: str) -> int:
        """The judge's 1..5 grade of ``response`` before any scale: what its verdicts follow in every format."""
        return GRADES.get(response.split()[0], 3)

    def unit(self, response: str) -> float:
        """That grade normalised to [0, 1] on the scale (a checklist's aggregate of criteria graded alike)."""
        lo, hi = self.format.scale[0], self.format.scale[-1]
        return (self.grade(response) - lo) / (hi - lo)


@dataclass
class Outcome:
    """What an entry point gave: ``values`` per row (rewards, scores, winners ...), or ``refused``, the message
    it stopped with at start (``code``: a command's exit status)."""

    values: list[Any] = field(default_factory=list)
    refused: str | None = None
    code: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def named_formats(text: str) -> set[str]:
    """The registered format names ``text`` mentions (whole names: ``flow-judge`` is not in ``flow-judge-3``)."""
    return {n for n in JUDGE_FORMATS if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}


def assert_refused(out: Outcome, cell: Cell, task: str, code: int | None = 2) -> None:
    """Refused at start with one line that names the format and lists, of the registered formats, only those that
    judge ``task`` (the refused one aside)."""
    assert out.refused is not None, f"expected a refusal at start, got {out.values}"
    line = out.refused.strip()
    assert "\n" not in line, f"the refusal is not one line: {line!r}"
    if code is not None:
        assert out.code == code, (out.code, line)
    name = cell.format.name
    assert name in line, f"the refusal does not name the format {name!r}: {line}"
    wrong = sorted(n for n in named_formats(line) - {name} if task not in JUDGE_FORMATS.get(n).tasks)
    assert not wrong, f"the refusal lists formats that cannot judge {task}: {wrong}: {line}"


def assert_refused_checklist(out: Outcome, names: tuple[str, ...]) -> None:
    """Refused (before anything is judged) with one line naming the checklist column and ``names``."""
    assert out.refused is not None, f"expected a refusal of the checklist, got {out.values}"
    line = out.refused.strip()
    assert "\n" not in line and "'checklist'" in line and all(n in line for n in names), line
