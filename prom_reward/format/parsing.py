"""Verdict parsing of Prometheus 2 outputs: feedback and a verdict, lenient about how the verdict is written and
strict about what it is (the accepted forms are in docs/formats.md); never raises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from prom_reward.format.eos import content_end

Task = Literal["absolute", "relative"]
"""What a judgment is: an absolute grade of one response, or a pairwise verdict between two."""

ABSOLUTE_VERDICTS = ("1", "2", "3", "4", "5")
RELATIVE_VERDICTS = ("A", "B")

_TRAILING_PUNCT = ".!"

# Every `\s*` below is followed by a required character: no bad backtracking on long inputs.
_OPEN = r"""(?:[(\["'*“‘]\s*)*"""  # ( [ " ' * before a verdict
_CLOSE = r"""(?:\s*[)\]"'*”’])*"""  # ) ] " ' * after it
_OF_FIVE = r"(?:\s*/\s*5|\s+(?i:out\s+of)\s+5)?"  # "4/5", "4 out of 5"
_MARKER_CLOSE = r"\s*(?:\]\s*)?(?::\s*)?"  # "[RESULT]", "[RESULT]:", "[RESULT:"
_SCORE_LABEL = r"(?i:(?:final\s+|overall\s+)?score)\b\s*(?:[:=]\s*)?"
# After a marker, a few more labels are plain restatements of the slot: "Result: 4", "score of 1".
_PAYLOAD_LABEL = r"(?i:(?:an?\s+)?(?:(?:final\s+|overall\s+)?(?:score|result)\b\s*(?:[:=]\s*|of\s+)?))"
_DIGIT = r"(?P<v>[1-5])"
_LETTER = r"(?P<v>[AB])"

_MARKER = re.compile(r"\[\s*result\b", re.IGNORECASE)
_LEADING_LABEL = re.compile(r"\A\s*(?:#+\s*)?feedback\s*:\s*", re.IGNORECASE)

# What may follow the last marker, up to the end of the text (used with fullmatch).
_RESTATED = rf"(?:\s+{_OPEN}{_PAYLOAD_LABEL}{_OPEN}(?P=v){_OF_FIVE}{_CLOSE})?"  # "4\nScore: 4" (same value)
_PAYLOAD = {
    "absolute": re.compile(
        _MARKER_CLOSE + _OPEN + f"(?:{_PAYLOAD_LABEL}{_OPEN})?" + _DIGIT + _OF_FIVE + _CLOSE + _RESTATED
    ),
    "relative": re.compile(_MARKER_CLOSE + _OPEN + rf"(?:(?i:response)\b\s*(?::\s*)?{_OPEN})?" + _LETTER + _CLOSE),
}

# Marker-free forms, anchored at the end of the text; True: the match is a label cut from the feedback.
_FALLBACKS: dict[str, tuple[tuple[re.Pattern[str], bool], ...]] = {
    "absolute": (
        (re.compile(rf"[(\[]\s*{_SCORE_LABEL}{_DIGIT}{_OF_FIVE}\s*[)\]]\Z"), True),  # [Score 4], (Score: 5)
        (re.compile(rf"\b(?i:(?:final\s+|overall\s+)?score)\s*[:=]\s*{_DIGIT}{_OF_FIVE}\Z"), True),
        (re.compile(rf"\b(?i:score\s+of)\s+{_DIGIT}{_OF_FIVE}\Z"), False),  # "a score of 3"
        (re.compile(rf"(?<![\w/.])[(\[]?{_DIGIT}(?:\s*/\s*5|\s+(?i:out\s+of)\s+5)[)\]]?\Z"), False),
    ),
    "relative": ((re.compile(rf"[(\[]\s*(?i:response)\s+{_LETTER}\s*[)\]]\Z"), True),),  # [Response B]
}

# Words that make a marker-free verdict in the final sentence ambiguous (whole words, any case).
_DOUBT_WORDS = """
not no never none nothing nor neither without cannot hardly barely maybe perhaps possibly probably likely
arguably might may would could should if unless until except or either between than too almost nearly about
around roughly approximately borderline least most instead rather lack lacks lacking fail fails short below
above under beyond unworthy undeserving consider considered considering tempted unsure uncertain unclear
initially originally previously earlier initial previous draft from deduct minus plus range scale
""".split()
_DOUBT = re.compile(r"(?i)n't\b|n’t\b|\b(?:" + "|".join(sorted(set(_DOUBT_WORDS))) + r")\b")
_SENTENCE_BREAK = re.compile(r"[.!?;](?=\s)|\n")


def _unambiguous(text: str, found: re.Match[str], end: int) -> bool:
    """A marker-free verdict counts only when its final sentence has no doubt word and no other number."""
    start = max([0, *(b.end() for b in _SENTENCE_BREAK.finditer(text, 0, found.start("v")))])
    sentence = text[start:end]
    if _DOUBT.search(sentence):
        return False
    verdict_at = found.start("v") - start
    others = [m for m in re.finditer(r"\d+", sentence) if m.start() != verdict_at]
    return all(m.group() == "5" and re.search(r"(?:/\s*|(?i:out\s+of)\s+)\Z", sentence[: m.start()]) for m in others)


@dataclass(frozen=True)
class ParsedOutput:
    """A judge output split into ``feedback`` (before the verdict marker, without a ``Feedback:`` label) and
    ``verdict`` (1-5, ``"A"``/``"B"`` or None); ``verdict_start`` indexes the verdict character in the text;
    ``reason``: why there is no verdict, when the parser says."""

    feedback: str
    verdict: int | str | None
    verdict_start: int | None
    reason: str | None = None


def _last_marker(text: str) -> re.Match[str] | None:
    matches = list(_MARKER.finditer(text))
    return matches[-1] if matches else None


def parse_output(text: object, mode: Task) -> ParsedOutput:
    """A judge output's feedback and verdict; ``mode`` not absolute/relative: ValueError; a non-str: no verdict.

    >>> parse_output("Feedback: Lists 4 steps.\\n[RESULT] Score: 2", "absolute")
    ParsedOutput(feedback='Lists 4 steps.', verdict=2, verdict_start=41, reason=None)
    >>> parse_output("[RESULT] 4 ... [RESULT] 2.5", "absolute").verdict is None
    True
    """
    if mode not in _PAYLOAD:
        raise ValueError(f"mode must be 'absolute' or 'relative', not {mode!r}")
    if not isinstance(text, str):
        return ParsedOutput("", None, None)
    end = content_end(text, _TRAILING_PUNCT)
    marker = _last_marker(text)
    found: re.Match[str] | None = None
    cut = content_end(text)  # where the feedback ends
    if marker is not None:
        cut = marker.start()
        found = _PAYLOAD[mode].fullmatch(text, marker.end(), max(end, marker.end()))
    else:
        line_start = text.rfind("\n", 0, end) + 1
        for pattern, is_label in _FALLBACKS[mode]:
            found = pattern.search(text, line_start, end)
            if found is not None:  # the first form found decides
                if not _unambiguous(text, found, end):
                    found = None
                elif is_label:  # a label cut from the feedback
                    cut = found.start()
                break
    feedback = _LEADING_LABEL.sub("", text[:cut], count=1).strip()
    if found is None:
        return ParsedOutput(feedback, None, None)
    return ParsedOutput(feedback, int(found["v"]) if mode == "absolute" else found["v"], found.start("v"))


def parse_absolute(text: object) -> int | None:
    """The 1-5 score a judge output ends with, or ``None``."""
    verdict = parse_output(text, "absolute").verdict
    return verdict if isinstance(verdict, int) else None


def parse_relative(text: object) -> Literal["A", "B"] | None:
    """The preferred response (``"A"`` or ``"B"``) a judge output ends with, or ``None``."""
    verdict = parse_output(text, "relative").verdict
    return "A" if verdict == "A" else "B" if verdict == "B" else None
