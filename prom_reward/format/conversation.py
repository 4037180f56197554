"""Turning TRL's standard (string) and conversational (message list) rows into judge text: ``prompt_text`` (one
user message, or ``User:``/``Assistant:`` turns) and ``completion_text`` (assistant contents joined)."""

from __future__ import annotations

from typing import Any

from prom_reward.errors import InputError

TextOrMessages = str | list[dict[str, Any]]
"""A TRL prompt or completion: plain text, or a list of ``{"role": ..., "content": ...}`` messages."""

_ROLE_NAMES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _bad(index: int | None, field: str, what: str) -> InputError:
    """The error of a row's ``field`` that is not what it must be (``what``), naming the item."""
    return InputError(f"{'' if index is None else f'item {index}: '}{field} {what}", index=index, field=field)


def _content(message: object, index: int | None, field: str) -> str:
    if isinstance(message, dict) and message.get("tool_calls") and message.get("content") is None:
        return ""  # an assistant turn that only calls tools (TRL's tool loop): its results follow as messages
    if not isinstance(message, dict) or "content" not in message:
        raise _bad(index, field, f"messages must be dicts with 'role' and 'content', got {message!r:.80}")
    content = message["content"]
    if isinstance(content, list):  # multimodal-style parts: keep the text parts
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        bad = [t for t in parts if not isinstance(t, str)]
        if bad:
            raise _bad(
                index,
                field,
                f"message content part 'text' must be text, got {type(bad[0]).__name__} ({bad[0]!r:.60}); fix: give "
                "each text part a string (or drop the part)",
            )
        content = "".join(parts)
    if not isinstance(content, str):
        raise _bad(index, field, f"message content must be text, got {type(content).__name__}")
    return content


def is_conversational(x: object) -> bool:
    """True for a list of message dicts."""
    return isinstance(x, list) and all(isinstance(m, dict) and "role" in m for m in x)


def prompt_text(prompt: TextOrMessages, index: int | None = None) -> str:
    """The instruction the judge sees for a TRL prompt (string or messages)."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list) or not prompt:
        raise _bad(index, "prompt", f"must be a string or a non-empty list of messages, got {type(prompt).__name__}")
    turns = [m for m in prompt if not (isinstance(m, dict) and m.get("role") == "system")]
    if len(turns) == 1:
        return _content(turns[0], index, "prompt")
    roles = [str(m.get("role")) if isinstance(m, dict) else "None" for m in prompt]
    labels = [_ROLE_NAMES.get(r, r.title()) for r in roles]  # each turn's: "User", "Assistant" ...
    return "\n\n".join(f"{label}: {_content(m, index, 'prompt')}" for label, m in zip(labels, prompt, strict=True))


def completion_text(completion: TextOrMessages, index: int | None = None) -> str:
    """The response the judge sees for a TRL completion (string or assistant messages)."""
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, list):
        raise _bad(index, "completion", f"must be a string or a list of messages, got {type(completion).__name__}")
    return "\n\n".join(_content(m, index, "completion") for m in completion)
