"""The judge-format seam: one object per judge format (prompts, parser, verdict tokens, forcing suffix).

A ``JudgeFormat`` holds everything a judge's text interface needs: the prompt for each task it supports
(system and user messages), the strict parser of its outputs, the verdict token texts read for expected
scores, the prefix after which the verdict is one token (forced verdicts), and its own markers, which are
neutralised inside judged texts. ``JUDGE_FORMATS`` maps names to formats; a failed lookup lists the valid
names. The formats themselves live in ``prom_reward.format.formats``, one module each.

Example:
    >>> Prompt(system="", user="Grade this.")
    Prompt(system='', user='Grade this.')
    >>> get_judge_format("no-such-format")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    UnknownNameError: unknown judge format 'no-such-format'; valid names: ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from prom_reward.errors import ConfigError
from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric
from prom_reward.registry import Registry

__all__ = ["JUDGE_FORMATS", "JudgeFormat", "Prompt", "Task", "get_judge_format"]

Task = Literal["absolute", "relative"]


@dataclass(frozen=True)
class Prompt:
    """The messages a judge format sends for one judgment."""

    system: str
    """The system message; ``""`` when the format sends none."""
    user: str
    """The user message."""


class JudgeFormat(ABC):
    """A judge's text interface: prompts, parser, verdict tokens and the suffix that forces a verdict."""

    name: str
    """Registry key, e.g. ``"prometheus2"``."""
    tasks: frozenset[Task]
    """What it judges: ``{"absolute"}``, ``{"relative"}`` or both."""
    scale: tuple[int, ...]
    """Absolute verdicts low -> high (``(1, 2, 3, 4, 5)``; ``()`` for a pairwise-only format)."""
    force_prefix: str | None
    """Text after which the verdict is one token; None: expected scores and forced verdicts are refused."""
    markers: tuple[str, ...]
    """The format's own section tags and markers, neutralised inside judged texts."""

    @abstractmethod
    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        """The messages grading ``response`` to ``instruction`` against ``rubric``."""

    @abstractmethod
    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        """The messages comparing ``response_a`` and ``response_b`` against ``rubric``."""

    @abstractmethod
    def parse(self, text: str, task: Task) -> ParsedOutput:
        """Feedback and verdict of a judge output; a verdict-less result carries its ``reason``."""

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        """Why ``rubric`` cannot be used for ``task`` with this format, or None when it fits."""
        return None

    def verdict_labels(self, task: Task) -> tuple[str, ...]:
        """The verdict token texts for expected scores: the scale's numbers, or ``("A", "B")``."""
        return tuple(str(s) for s in self.scale) if task == "absolute" else ("A", "B")


JUDGE_FORMATS: Registry[JudgeFormat] = Registry("judge format")
"""Every registered judge format by name."""


def get_judge_format(name_or_obj: str | JudgeFormat) -> JudgeFormat:
    """The format registered as ``name_or_obj``, or the format itself when one is given."""
    if isinstance(name_or_obj, JudgeFormat):
        return name_or_obj
    if not isinstance(name_or_obj, str):
        raise ConfigError(
            f"a judge format is a name ({', '.join(JUDGE_FORMATS.names()) or 'none registered'}) or a JudgeFormat, "
            f"got {type(name_or_obj).__name__}"
        )
    return JUDGE_FORMATS.get(name_or_obj)
