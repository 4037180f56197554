"""Flow-Judge v0.1: its prompt (byte for byte ``flow-judge==0.1.2``'s), its strict ``<feedback>``/``<score>``
parser and its three scales (``flow-judge``, ``flow-judge-3``, ``flow-judge-binary``); docs/formats.md."""

from __future__ import annotations

from prom_reward.errors import ConfigError
from prom_reward.format.eos import content_end, drop_cut_tag, strip_eos
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, Prompt, Task, unsupported_task
from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import fill, need_str

_FEEDBACK, _END_FEEDBACK, _SCORE, _END_SCORE = "<feedback>", "</feedback>", "<score>", "</score>"

USER_TEMPLATE = (
    "# GOAL\nYour job is to evaluate a task carried out by an AI system powered by a large language model.\n\n"
    "You will be provided with the inputs and output of the task, as well as the evaluation criteria and scoring "
    "rubric. Your task is to evaluate the output of the AI system based on the evaluation criteria and scoring rubric "
    "provided.\n\n"
    "# INPUT\nBelow are the inputs required for performing the task:\n<inputs>\n{INPUTS}\n</inputs>\n\n"
    "# OUTPUT\nBelow is the output of the task:\n<output>\n{OUTPUT}\n</output>\n\n"
    "# EVALUATION CRITERIA AND SCORING RUBRIC\n"
    "Here are the evaluation criteria and the rubric that you need to use for evaluating the task:\n"
    "<evaluation_criteria>\n{EVALUATION_CRITERIA}\n</evaluation_criteria>\n\n"
    "<scoring_rubric>\n{RUBRIC}\n</scoring_rubric>\n\n"
    "# INSTRUCTIONS FOR THE EVALUATION\n"
    "1. Understand the task and criteria: Familiarize yourself with the task to be evaluated. Review the "
    "evaluation criteria and scoring rubric to understand the different levels of performance and the "
    "descriptions for each score.\n"
    "2. Review the inputs and output: Look at the inputs provided for the task. Examine the output "
    "generated from completing the task.\n"
    "3. Compare output to score descriptions: Compare the output against the criteria and score descriptions "
    "in the scoring rubric. For each criterion,decide which description best matches the output.\n"
    "4. After comparing the output to the score descriptions, pay attention to the small details that might "
    "impact the final score that you assign. Sometimes a small difference can dictate the final score.\n"
    "5. Write verbal feedback justifying your evaluation that includes a detailed rationale, referring to "
    "specific aspects of the output and comparing them to the rubric.\n"
    "6. Assign a final score based on the scoring rubric.\n\n"
    "## FORMAT FOR THE EVALUATION\n"
    "- Write the verbal feedback inside <feedback> tags without any additional surrounding text.\n"
    "- Write the numeric score inside <score> tags, without any additional surrounding text and always after "
    "the feedback.\n\n"
    "Please accurately evaluate the task. Strictly adhere to the evaluation criteria and rubric."
)


def tagged(fields: list[tuple[str, str]]) -> str:
    """``<name>\\nvalue\\n</name>`` blocks, one per field, joined by newlines (Flow-Judge's variables)."""
    return "\n".join(f"<{name}>\n{value}\n</{name}>" for name, value in fields)


_SCALES = {"flow-judge": (1, 2, 3, 4, 5), "flow-judge-3": (1, 2, 3), "flow-judge-binary": (0, 1)}
_SCALE_NAMES = {5: "5-point", 3: "3-point", 2: "binary (pass/fail)"}
_SECTION_TAGS = ("inputs", "output", "evaluation_criteria", "scoring_rubric", "query", "reference_answer", "response")
_HEADERS = tuple(line for line in USER_TEMPLATE.splitlines() if line.startswith("#"))


class FlowJudgeFormat(JudgeFormat):
    """Flow-Judge v0.1 on one of its scales (absolute grading only)."""

    tasks = frozenset({"absolute"})
    force_prefix, force_suffix = _SCORE, _END_SCORE
    markers = (*(t for tag in ("feedback", "score", *_SECTION_TAGS) for t in (f"<{tag}>", f"</{tag}>")), *_HEADERS)

    def __init__(self, name: str, scale: tuple[int, ...]) -> None:
        self.name, self.scale = name, scale

    @property
    def _scale_text(self) -> str:
        return f"{_SCALE_NAMES[len(self.scale)]} scale ({', '.join(map(str, self.scale))})"

    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        problem = self.rubric_problem(rubric, "absolute")
        if problem is not None:
            raise ConfigError(problem)
        inputs = [("query", need_str(instruction, "instruction"))]
        if reference is not None:
            inputs.append(("reference_answer", need_str(reference, "reference_answer")))
        items = sorted(zip(self.scale, rubric.descriptions, strict=True))
        values = {
            "INPUTS": tagged(inputs),
            "OUTPUT": tagged([("response", need_str(response, "response"))]),
            "EVALUATION_CRITERIA": rubric.criteria,
            "RUBRIC": "\n".join(f"- Score {score}: {text}" for score, text in items),
        }
        return Prompt(system="", user=fill(USER_TEMPLATE, values))

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        if task != "absolute":
            return f"{self.name} judges absolute tasks only (grading on its {self._scale_text}), not {task!r}"
        n, got = len(self.scale), len(rubric.descriptions)
        if got == n:
            return None
        other = next((name for name, scale in _SCALES.items() if len(scale) == got), None)
        return (
            f"{self.name} grades need {n} score descriptions (scores {', '.join(map(str, self.scale))}, lowest "
            f"first), got {got} for rubric {rubric.criteria[:60]!r}; give a 'descriptions' list of {n}"
            + (f", or use the format {other!r}, whose scale has {got} scores" if other else "")
        )

    def parse(self, text: str, task: Task) -> ParsedOutput:
        if task != "absolute":
            raise unsupported_task(self, task)
        if not isinstance(text, str):
            return ParsedOutput("", None, None, f"{self.name}: the output is not text (got {type(text).__name__})")
        end = content_end(text)
        start, close = text.find(_FEEDBACK), text.rfind(_END_FEEDBACK, 0, end)
        if start < 0 or close < start:
            missing = f"no {_FEEDBACK}" if start < 0 else f"{_FEEDBACK} is never closed by {_END_FEEDBACK}"
            return self._fail(text[:end].strip(), f"{missing}; the output must be {_FEEDBACK}...{_END_FEEDBACK}")
        feedback = text[start + len(_FEEDBACK) : close].strip()
        if _SCORE in text[:start]:
            return self._fail(feedback, f"a {_SCORE} tag before the feedback; the score comes after {_END_FEEDBACK}")
        tail_at = close + len(_END_FEEDBACK)
        tail = text[tail_at:end]
        opens = tail.count(_SCORE)
        if opens != 1:
            what = f"no {_SCORE}...{_END_SCORE}" if opens == 0 else f"{opens} {_SCORE} tags (one verdict only)"
            return self._fail(feedback, f"{what} after the feedback")
        slot = tail.index(_SCORE)
        if tail[:slot].strip():
            return self._fail(feedback, f"text between {_END_FEEDBACK} and {_SCORE}: {tail[:slot].strip()[:40]!r}")
        value_at = slot + len(_SCORE)
        shut = tail.find(_END_SCORE, value_at)
        if shut < 0:
            return self._fail(feedback, f"{_SCORE} is never closed by {_END_SCORE}")
        after = tail[shut + len(_END_SCORE) :]
        if after.strip():
            return self._fail(feedback, f"text after {_END_SCORE}: {after.strip()[:40]!r}")
        raw = tail[value_at:shut]
        value = raw.strip()
        if value not in self.verdict_labels("absolute"):
            return self._fail(feedback, f"score {value[:40]!r} is not on its {self._scale_text}")
        verdict_start = tail_at + value_at + len(raw) - len(raw.lstrip())
        return ParsedOutput(feedback, int(value), verdict_start)

    def forcing_body(self, text: str) -> str | None:
        """The output up to ``</feedback>`` and a newline, as Flow-Judge writes them (a cut feedback closed on its
        own line, a cut tag dropped); None when a score was written (re-sampled).

        >>> JUDGE_FORMATS.get("flow-judge").forcing_body("<feedback>Clear, but the sec")
        '<feedback>Clear, but the sec\\n</feedback>\\n'
        """
        body = drop_cut_tag(strip_eos(text)).rstrip()
        start = body.find(_FEEDBACK)
        if start < 0:
            return None if _SCORE in body else f"{_FEEDBACK}\n{body.strip()}\n{_END_FEEDBACK}\n"
        close = body.rfind(_END_FEEDBACK)
        if close < start:
            return f"{body}\n{_END_FEEDBACK}\n"
        closed = close + len(_END_FEEDBACK)
        return body[:closed] + "\n" if body[closed:].strip() in ("", _SCORE) else None

    def _fail(self, feedback: str, why: str) -> ParsedOutput:
        return ParsedOutput(feedback, None, None, f"{self.name}: {why}")


for _name, _scale in _SCALES.items():
    JUDGE_FORMATS.register(_name, FlowJudgeFormat(_name, _scale))
