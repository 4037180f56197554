"""Where a judge's text really ends: the end-of-sequence tokens the parsers and the sampler's forcing read past, and
the closing of an output cut at ``max_tokens`` so a verdict can be forced after it (the formats' ``forcing_body``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

EOS_TOKENS = tuple("</s> <|im_end|> <|eot_id|> <|endoftext|> <|end_of_text|> <|end|> <end_of_turn> <eos>".split())
"""End-of-turn tokens of the judge families in use (Llama 2 / Mistral, ChatML, Llama 3, GPT-2, Phi, Gemma)."""


def content_end(text: str, strip: str = "") -> int:
    """Index where ``text`` ends once trailing EOS tokens, whitespace and ``strip``'s characters are dropped.

    >>> content_end("Good. [RESULT] 4</s>\\n")
    16
    """
    end = len(text)
    while end > 0:
        ch = text[end - 1]
        if ch.isspace() or ch in strip:
            end -= 1
            continue
        if not text.endswith(EOS_TOKENS, 0, end):
            break
        end -= len(next(t for t in EOS_TOKENS if text.endswith(t, 0, end)))
    return end


def strip_eos(text: str) -> str:
    """``text`` without its trailing EOS tokens and whitespace."""
    return text[: content_end(text)]


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
