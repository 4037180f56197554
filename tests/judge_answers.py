"""What each judge format's judge model reads and writes, by hand from the judge's published format (its paper,
model card or reference code, as docs/formats.md cites them), never with ``prom_reward``'s format code: a stand-in
judge answering with the code under test would prove nothing.

``WIRES`` maps a format name (every one ``JUDGE_FORMATS`` registers, and the YAML format of the crossing tests,
``tests/format/yaml_specs.py`` ``tiny_spec``) to how its prompt shows the response(s) and how its judge writes a
grade or a verdict. ``read_prompt`` finds the format of a prompt and the texts it asks about; ``answer`` writes
that format's output. ``tests/crossings/test_wires.py`` checks that every registered format has a wire (a new
format fails until it is added here) and that each format's parser reads each answer as meant.

Grades are given on Prometheus 2's 1..5 and mapped onto the format's scale (``on_scale``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROMETHEUS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Wire:
    """One judge's text interface as its judge sees it."""

    absolute: re.Pattern[str] | None
    """Finds an absolute prompt; group 1 is the response. None: the judge grades nothing."""
    relative: re.Pattern[str] | None
    """Finds a pairwise prompt; groups 1 and 2 are responses A and B. None: the judge compares nothing."""
    grade: str = ""
    """An absolute answer, ``{score}`` for the grade."""
    verdict: tuple[str, str] = ("", "")
    """The answers saying A, then B."""
    scale: tuple[int, ...] = PROMETHEUS
    """The grades, low to high; ``()`` when the prompt's rubric lists them (Flow-Judge's ``- Score N:`` lines)."""
    system: bool | None = None
    """Whether the judge's prompt has a system message (None: either); tells apart formats whose users match."""


_PROMETHEUS = Wire(
    absolute=re.compile(r"###Response to evaluate:\n(.*?)\n\n###", re.S),
    relative=re.compile(r"###Response A:\n(.*?)\n\n###Response B:\n(.*?)\n\n###", re.S),
    grade="The response was graded by its first word. [RESULT] {score}",
    verdict=("Compared by their first words. [RESULT] A", "Compared by their first words. [RESULT] B"),
)
_FLOW = Wire(
    absolute=re.compile(r"<output>\n<response>\n(.*?)\n</response>\n</output>", re.S),
    relative=None,
    grade="<feedback>\nGraded by its first word.\n</feedback>\n<score>\n{score}\n</score>",
    scale=(),
)
_MT_BENCH = re.compile(
    r"\[The Start of Assistant A's Answer\]\n(.*?)\n\[The End of Assistant A's Answer\]\n\n"
    r"\[The Start of Assistant B's Answer\]\n(.*?)\n\[The End of Assistant B's Answer\]",
    re.S,
)
_RM_R1 = re.compile(
    r"\[The Start of Chatbot A's Response\]\n(.*?)\n\[The End of Chatbot A's Response\]\n\n"
    r"\[The Start of Chatbot B's Response\]\n(.*?)\n\[The End of Chatbot B's Response\]",
    re.S,
)
_RM_R1_ANSWER = (
    "<type>Chat</type>\n\n<rubric>\nFirst words.\n</rubric>\n\n<eval>\n{why}\n</eval>\n\n<answer>[[{v}]]</answer>"
)


def _rm_r1(think: str) -> tuple[str, str]:
    return tuple(think + _RM_R1_ANSWER.format(why=f"Chatbot {v} starts better.", v=v) for v in "AB")  # type: ignore[return-value]


WIRES: dict[str, Wire] = {
    "prometheus2": _PROMETHEUS,
    "m-prometheus": _PROMETHEUS,
    "flow-judge": _FLOW,
    "flow-judge-3": _FLOW,
    "flow-judge-binary": _FLOW,
    "selene": Wire(
        absolute=None,
        relative=re.compile(r"Response A:\n```\n(.*?)\n```\n\nResponse B:\n```\n(.*?)\n```\Z", re.S),
        verdict=tuple(f"**Reasoning:** Response {v} starts better.\n\n**Result:** {v}" for v in "AB"),  # type: ignore[arg-type]
    ),
    "mt-bench-pairwise": Wire(
        absolute=None,
        relative=_MT_BENCH,
        verdict=("Assistant A starts better. [[A]]", "Assistant B starts better. [[B]]"),
    ),
    "offsetbias": Wire(
        absolute=None,
        relative=re.compile(r"# Output \(a\):\n(.*?)\n# Output \(b\):\n(.*?)\n# Which is better", re.S),
        verdict=("Output (a)", "Output (b)"),
    ),
    "rise-judge": Wire(
        absolute=None,
        relative=re.compile(r"回答A：(.*?)\n回答B：(.*?)\n\n如果你认为", re.S),
        verdict=("逐步分析：回答A开头更好。\n\n[[A]]", "逐步分析：回答B开头更好。\n\n[[B]]"),
    ),
    "con-j": Wire(
        absolute=None,
        relative=re.compile(r"回答1：(.*?)\n回答2：(.*)\Z", re.S),
        verdict=('{"原因": "回答1开头更好", "更好的回答": 1}', '{"原因": "回答2开头更好", "更好的回答": 2}'),
    ),
    "rm-r1": Wire(absolute=None, relative=_RM_R1, verdict=_rm_r1(""), system=True),
    "rm-r1-reasoning": Wire(
        absolute=None, relative=_RM_R1, verdict=_rm_r1("<think>\nCompare the first words.\n</think>\n"), system=False
    ),
    "tiny": Wire(  # tests/format/yaml_specs.py tiny_spec: "Score: N" on 1..3, "Score: a|b"
        absolute=re.compile(r"</q>\n###Answer\n(.*?)\n"),
        relative=re.compile(r"(?:\A|\n)A: (.*?)\nB: (.*?)\n\["),
        grade="Score: {score}",
        verdict=("Score: a", "Score: b"),
        scale=(1, 2, 3),
    ),
}
"""Every judge format's wire, by format name."""


@dataclass(frozen=True)
class Read:
    """A prompt as a judge reads it: its format's wire, the task and the texts judged."""

    name: str
    task: str
    texts: tuple[str, ...]
    scale: tuple[int, ...]


def read_prompt(system: str, user: str) -> Read | None:
    """The first wire (in ``WIRES`` order) whose prompt ``user`` is, and what it asks about; None if none is."""
    for name, wire in WIRES.items():
        if wire.system is not None and wire.system != bool(system):
            continue
        for task, pattern in (("absolute", wire.absolute), ("relative", wire.relative)):
            found = pattern.search(user) if pattern is not None else None
            if found:
                scale = wire.scale or tuple(int(s) for s in re.findall(r"^- Score (\d+):", user, re.M))
                return Read(name, task, found.groups(), scale)
    return None


def on_scale(grade: int, scale: tuple[int, ...]) -> int:
    """A 1..5 grade on ``scale`` (its lowest for 1, its highest for 5, proportionally between)."""
    return scale[int((min(max(grade, 1), 5) - 1) / 4 * (len(scale) - 1) + 0.5)]


def answer(read: Read, grades: tuple[int, ...]) -> str:
    """The format's output: the grade of ``grades[0]`` (1..5) on its scale, or A when ``grades[0]`` is at least
    ``grades[1]`` (a tie says A in both orders: undecided), else B."""
    wire = WIRES[read.name]
    if read.task == "absolute":
        return wire.grade.format(score=on_scale(grades[0], read.scale))
    return wire.verdict[0 if grades[0] >= grades[1] else 1]
