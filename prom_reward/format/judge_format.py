"""The judge-format seam: one object per judge format (prompts, parser, verdict tokens, forcing prefix).

A judge format is everything that is specific to one judge model's text interface: its prompt templates,
how its output is parsed, the verdict tokens read for expected scores, and the text after which its verdict
is one token. ``JUDGE_FORMATS`` holds the registered formats; ``get_judge_format`` looks one up by name (a
failed lookup lists the valid names) or passes a ``JudgeFormat`` through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric
from prom_reward.registry import Registry

__all__ = ["JUDGE_FORMATS", "JudgeFormat", "Prompt", "Task", "get_judge_format"]

Task = Literal["absolute", "relative"]


@dataclass(frozen=True)
class Prompt:
    """A rendered judge prompt: the system message and the user message."""

    system: str
    """The system message; "" when the format sends none."""
    user: str
    """The user message."""


class JudgeFormat(ABC):
    """One judge format: prompt templates, parser, verdict tokens and the suffix that forces a verdict."""

    name: str
    """Registry key, e.g. "prometheus2"."""
    tasks: frozenset[Task]
    """What it judges: {"absolute"}, {"relative"} or both."""
    scale: tuple[int, ...]
    """Absolute verdicts low -> high: (1, 2, 3, 4, 5); flow binary (0, 1); () if pairwise-only."""
    force_prefix: str | None
    """Text after which the verdict is ONE token; None: the verdict is not one token, so expected scores and
    forced verdicts are refused at start for this format."""
    markers: tuple[str, ...]
    """The format's own section tags/markers, neutralised inside judged texts."""

    @abstractmethod
    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        """The prompt grading one response (ConfigError when the format does not grade)."""

    @abstractmethod
    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        """The prompt comparing two responses (ConfigError when the format does not compare)."""

    @abstractmethod
    def parse(self, text: str, task: Task) -> ParsedOutput:
        """The feedback and verdict of a judge output; when there is no verdict, ``reason`` says why."""

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        """Why ``rubric`` cannot be used for ``task`` with this format; None when it fits."""
        return None

    def verdict_labels(self, task: Task) -> tuple[str, ...]:
        """The verdict token texts for expected scores."""
        return tuple(str(s) for s in self.scale) if task == "absolute" else ("A", "B")


JUDGE_FORMATS: Registry[JudgeFormat] = Registry("judge format")


def get_judge_format(name_or_obj: str | JudgeFormat) -> JudgeFormat:
    """The registered format called ``name_or_obj``, or ``name_or_obj`` itself when it is a JudgeFormat."""
    if isinstance(name_or_obj, JudgeFormat):
        return name_or_obj
    return JUDGE_FORMATS.get(name_or_obj)
