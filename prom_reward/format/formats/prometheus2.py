"""Prometheus 2's judge format (``prometheus2``, the default, and ``m-prometheus``): its prompts, its
``[RESULT]`` verdicts and its section markers."""

from __future__ import annotations

import re

from prom_reward.format.eos import strip_eos
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, Prompt, Task
from prom_reward.format.parsing import ParsedOutput, parse_output
from prom_reward.format.render import render_absolute, render_relative
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import ABS_SYSTEM_PROMPT, REL_SYSTEM_PROMPT

MARKERS = (
    "###Task Description",
    "###The instruction to evaluate",
    "###Response to evaluate",
    "###Reference Answer",
    "###Score Rubric",
    "###Feedback",
    "###Instruction",
    "###Response A",
    "###Response B",
    "[RESULT]",
)

# A verdict marker left open at the end of the text, or cut inside its letters (`... [RESU`); each run of
# whitespace is followed by a required character, so nothing backtracks.
_OPEN_MARKER = re.compile(r"\[(?:\s*r(?:e(?:s(?:u(?:lt?)?)?)?)?)?(?:\s*\])?(?:\s*:)?\s*$", re.IGNORECASE)
_VERDICTS = {"absolute": "1-5", "relative": "A or B"}


class Prometheus2Format(JudgeFormat):
    """Prometheus 2's prompts and verdicts, registered as ``name``."""

    tasks = frozenset({"absolute", "relative"})
    scale = (1, 2, 3, 4, 5)
    force_prefix = " [RESULT] "
    markers = MARKERS

    def __init__(self, name: str = "prometheus2") -> None:
        self.name = name

    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        return Prompt(ABS_SYSTEM_PROMPT, render_absolute(instruction, response, rubric, reference))

    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        return Prompt(REL_SYSTEM_PROMPT, render_relative(instruction, response_a, response_b, rubric, reference))

    def parse(self, text: str, task: Task) -> ParsedOutput:
        parsed = parse_output(text, task)  # (a task other than absolute / relative: ValueError)
        if parsed.verdict is not None:
            return parsed
        if isinstance(text, str) and "[result" in text.lower():
            why = f"the text after the last '[RESULT]' is not one verdict {_VERDICTS[task]}"
        else:
            why = f"no '[RESULT] {_VERDICTS[task]}' verdict at the end of the feedback"
        return ParsedOutput(parsed.feedback, None, None, f"{self.name}: {why}")

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        if task != "absolute" or len(rubric.descriptions) == len(self.scale):
            return None
        n = len(rubric.descriptions)
        return (
            f"rubric {rubric.criteria[:60]!r} has {n or 'no'} score descriptions; {self.name} grades need 5 "
            f"(score 1..5), got {n}; fix: give score1_description..score5_description"
        )

    def forcing_body(self, text: str) -> str | None:
        body = strip_eos(text)
        if "[result" in body.lower() and not _OPEN_MARKER.search(body):
            return None
        return _OPEN_MARKER.sub("", body).rstrip()


PROMETHEUS2 = JUDGE_FORMATS.register("prometheus2", Prometheus2Format("prometheus2"))
"""Prometheus 2 (``prometheus-eval/prometheus-7b-v2.0``, ``-8x7b-v2.0``): the default format."""
M_PROMETHEUS = JUDGE_FORMATS.register("m-prometheus", Prometheus2Format("m-prometheus"))
"""M-Prometheus (``Unbabel/M-Prometheus-3B``, ``-7B``, ``-14B``): Prometheus 2's prompts and verdicts."""
