"""Closing an output cut at ``max_tokens`` so a verdict can be forced after it: the helpers the formats'
``JudgeFormat.forcing_body`` share (find what was cut, close what is still open).

Example:
    >>> drop_cut_marker("Fine work.\\n\\n**Res", "**Result:**")
    'Fine work.\\n\\n'
    >>> drop_cut_marker("Fine work.", "**Result:**") is None
    True
    >>> open_tags("<eval>A is <quote_A>close", ("eval", "quote_A"))
    ['eval', 'quote_A']
    >>> drop_cut_tag("<eval>B wins.</ev")
    '<eval>B wins.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["drop_cut_marker", "drop_cut_tag", "open_tags"]

# Each run of whitespace below is followed by a required character (or the end): it matches one way only,
# so a "<" before a long run of whitespace costs linear time, not a backtracking search.
_CUT_TAG = re.compile(r"<(?:\s*/)?(?:\s*[A-Za-z_]+)?\s*$")


def drop_cut_marker(text: str, marker: str, *, min_chars: int = 2) -> str | None:
    """``text`` without ``marker`` written or cut at its end (its first ``k >= min_chars`` characters,
    whole marker included, any case, trailing whitespace ignored); None when ``text`` does not end so."""
    tail, low = text.rstrip(), marker.lower()
    for k in range(len(marker), min(min_chars, len(marker)) - 1, -1):
        if tail.lower().endswith(low[:k]):
            return tail[: len(tail) - k]
    return None


def drop_cut_tag(text: str) -> str:
    """``text`` without an XML-like tag cut at its end (``"... </ev"``, ``"... <"``)."""
    return _CUT_TAG.sub("", text)


def open_tags(text: str, names: Sequence[str]) -> list[str]:
    """The tags among ``names`` that ``text`` opens and does not close, outermost first (a closing tag
    closes its innermost open namesake and whatever was opened inside it)."""
    pattern = re.compile(r"<(?:\s*(/))?\s*(" + "|".join(map(re.escape, names)) + r")\s*>", re.IGNORECASE)
    canon = {n.lower(): n for n in names}
    stack: list[str] = []
    for found in pattern.finditer(text):
        name = canon[found.group(2).lower()]
        if not found.group(1):
            stack.append(name)
        elif name in stack:
            del stack[len(stack) - 1 - stack[::-1].index(name) :]
    return stack
