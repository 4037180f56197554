"""End-of-sequence tokens a judge may leave at the end of its text, and where the text really ends: the one list
the parser and the sampler's forcing read past."""

from __future__ import annotations

__all__ = ["EOS_TOKENS", "content_end", "strip_eos"]

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
        token = next((t for t in EOS_TOKENS if text.endswith(t, 0, end)), None)
        if token is None:
            break
        end -= len(token)
    return end


def strip_eos(text: str) -> str:
    """``text`` without its trailing EOS tokens and whitespace."""
    return text[: content_end(text)]
