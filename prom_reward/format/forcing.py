"""Closing an output cut at ``max_tokens`` so a verdict can be forced after it: the helpers the formats'
``forcing_body`` share."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["drop_cut_marker", "drop_cut_tag", "open_tags"]

# Each run of whitespace is followed by a required character (or the end), so nothing backtracks.
_CUT_TAG = re.compile(r"<(?:\s*/)?(?:\s*[A-Za-z_]+)?\s*$")


def drop_cut_marker(text: str, marker: str, *, min_chars: int = 2) -> str | None:
    """``text`` without ``marker`` (or its first ``k >= min_chars`` characters, any case) at its end; None when
    it does not end so."""
    tail, low = text.rstrip(), marker.lower()
    for k in range(len(marker), min(min_chars, len(marker)) - 1, -1):
        if tail.lower().endswith(low[:k]):
            return tail[: len(tail) - k]
    return None


def drop_cut_tag(text: str) -> str:
    """``text`` without an XML-like tag cut at its end (``"... </ev"``, ``"... <"``)."""
    return _CUT_TAG.sub("", text)


def open_tags(text: str, names: Sequence[str]) -> list[str]:
    """The tags among ``names`` that ``text`` opens and does not close, outermost first."""
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
