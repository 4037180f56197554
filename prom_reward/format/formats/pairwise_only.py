"""What the pairwise-only judge formats share: the refusal to grade, and the strict reading and forcing of a
verdict that is its own marker (``bracket_verdict``: ``[[A]]``/``[[B]]``)."""

from __future__ import annotations

import re

from prom_reward.format.eos import content_end, strip_eos
from prom_reward.format.judge_format import JudgeFormat, Prompt, Task
from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric

# Words that negate, hedge or compare a verdict in its clause (whole words, any case), and Chinese ones
# (substrings: Chinese has no word breaks).
_DOUBT_WORDS = """
not no never neither nor without cannot if unless would could might
maybe perhaps possibly or either whether instead rather than tie both
""".split()
_DOUBT_ZH = ("不", "没", "非", "无", "如果", "假如", "假设", "若", "或", "还是", "可能", "也许", "未")
_DOUBT = re.compile(
    r"(?i)n['’]t\b|\b(?:" + "|".join(_DOUBT_WORDS) + r")\b|" + "|".join(re.escape(w) for w in _DOUBT_ZH)
)
# Clause breaks: sentence punctuation and colons before whitespace, a line break, Chinese punctuation and comma.
_CLAUSE_BREAK = re.compile(r"[.!?;:](?=\s)|\n|[。！？；：，]")
_WRAP_OPEN = "*\"'“‘`「"
_WRAP_CLOSE = "*\"'”’`」)"
_BRACKET = re.compile(r"\[\[([^\[\]\n]{0,40})\]\]")
_HEADER_LINE = re.compile(r"\[[^\[\]{}]+\]")
_PUNCT_ONLY = re.compile(r"[\s.,;:!?*\"'“”‘’`，。；：！？]*")


def failure(feedback: str, reason: str) -> ParsedOutput:
    """A parse without a verdict, with its reason."""
    return ParsedOutput(feedback, None, None, reason)


def verdict_end(text: str) -> int:
    """Where the text's content ends: trailing whitespace, EOS tokens and ONE closing ``.`` or ``。`` dropped (an
    ellipsis is kept: "[[A]]..." trails off, so it is not a verdict)."""
    end = content_end(text)
    if end and text[end - 1] in ".。" and not text.endswith("..", 0, end):
        end = content_end(text[: end - 1])
    return end


def doubt_in_clause(text: str, start: int) -> str | None:
    """The first negating/hedging word in the clause that ends at ``start`` (None when there is none)."""
    clause_start = max([0, *(b.end() for b in _CLAUSE_BREAK.finditer(text, 0, start))])
    doubt = _DOUBT.search(text, clause_start, start)
    return doubt.group(0) if doubt else None


def bracket_verdict(name: str, text: str, start: int = 0, end: int | None = None) -> ParsedOutput:
    """The ``[[A]]``/``[[B]]`` verdict ending ``text[start:end]``, alone and unhedged in its clause; ``feedback``
    is the text before it.

    >>> print(bracket_verdict("mt-bench-pairwise", "It is not [[A]]").reason)
    mt-bench-pairwise: the verdict [[A]] is negated or hedged ('not' in its clause)
    """
    end = verdict_end(text) if end is None else end
    found = list(_BRACKET.finditer(text, start, end))
    if not found:
        return failure(text[start:end].strip(), f"{name}: no [[A]] or [[B]] verdict at the end of the output")
    last = found[-1]
    feedback = text[start : last.start()].rstrip(_WRAP_OPEN + " \t\n").strip()
    value = last.group(1).strip()
    if value not in ("A", "B"):
        return failure(feedback, f"{name}: the last verdict is {last.group(0)!r}, not [[A]] or [[B]]")
    if any(c not in _WRAP_CLOSE and not c.isspace() for c in text[last.end() : end]):
        tail = text[last.end() : end].strip()
        return failure(feedback, f"{name}: text follows the last verdict {last.group(0)} ({tail[:40]!r})")
    if len(found) > 1 and _PUNCT_ONLY.fullmatch(text, found[-2].end(), last.start()):
        return failure(feedback, f"{name}: two verdicts at the end ({found[-2].group(0)} then {last.group(0)})")
    clause_start = max([0, *(b.end() for b in _CLAUSE_BREAK.finditer(text, start, last.start()))])
    if any(b.start() >= clause_start for b in found[:-1]):
        return failure(feedback, f"{name}: two verdicts in the last clause ({last.group(0)} is not alone)")
    doubt = doubt_in_clause(text, last.start())
    if doubt is not None:
        return failure(feedback, f"{name}: the verdict {last.group(0)} is negated or hedged ({doubt!r} in its clause)")
    return ParsedOutput(feedback, value, last.start(1) + last.group(1).index(value))


def header_lines(template: str) -> tuple[str, ...]:
    """The lines of ``template`` that are a bracketed header alone (``[User Question]``): its section markers."""
    return tuple(line for line in template.splitlines() if _HEADER_LINE.fullmatch(line))


def paragraph(body: str) -> str:
    """``body`` ended by the blank line a verdict paragraph follows (``""`` for an empty body)."""
    body = body.rstrip()
    return body + "\n\n" if body else ""


def bracket_forcing_body(text: str) -> str | None:
    """The body an ``[[A]]``/``[[B]]`` verdict is forced after: the output without an open or cut ``[[``, then a
    blank line; None when it ends with a bracketed verdict or is cut inside one (re-sampled).

    >>> bracket_forcing_body("B is right. My final verdict: [")
    'B is right. My final verdict:\\n\\n'
    >>> bracket_forcing_body("My final verdict: [[A") is None
    True
    """
    body = strip_eos(text)
    opened = body.rfind("[[")
    if opened >= 0:
        after = body[opened + 2 :]
        if not after.strip():
            return paragraph(body[:opened])
        closed = after.find("]]")
        if closed < 0 or _PUNCT_ONLY.fullmatch(after, closed + 2):
            return None
    body = body.rstrip()
    return paragraph(body[:-1] if body.endswith("[") else body)


class PairwiseOnlyFormat(JudgeFormat):
    """A format that compares two responses and never grades one: a user template (``{instruction}``,
    ``{response_a}``, ``{response_b}``), an optional system message, and ``[[A]]``/``[[B]]`` verdicts by default."""

    tasks: frozenset[Task] = frozenset({"relative"})
    scale: tuple[int, ...] = ()
    system: str = ""
    template: str

    def uses_rubric(self, task: Task) -> bool:
        return False

    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        user = self.template.format(instruction=instruction, response_a=response_a, response_b=response_b)
        return Prompt(self.system, user)

    def parse(self, text: str, task: Task) -> ParsedOutput:
        if task != "relative":
            return failure("", f"{self.name}: compares two responses only; there is no {task!r} verdict")
        if not isinstance(text, str):
            return failure("", f"{self.name}: no output text (got {type(text).__name__})")
        return self.parse_relative(text)

    def parse_relative(self, text: str) -> ParsedOutput:
        """The verdict of a pairwise output (``text`` is a str)."""
        return bracket_verdict(self.name, text)

    def forcing_body(self, text: str) -> str | None:
        return bracket_forcing_body(text)
