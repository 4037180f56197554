"""Reading the judge's distribution over verdicts from the top-k logprobs at the verdict token (variants that
decode to the same verdict, ``"4"`` and ``" 4"``, are summed)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from prom_reward.backends.base import TokenLogprobs

_SPACE_MARKS = " \t\n\r\u2581\u0120\u010a"  # space, SentencePiece '▁', GPT-2 'Ġ' and 'Ċ'


def normalize_token(token: str) -> str:
    """Token text without surrounding whitespace or space marks."""
    return token.strip(_SPACE_MARKS)


def distribution_at(position: TokenLogprobs, labels: Sequence[str]) -> tuple[dict[str, float] | None, float]:
    """(renormalised distribution over ``labels`` at one position, raw mass of labels); (None, 0.0) when no label
    is among the position's top-k tokens."""
    mass: dict[str, float] = {}
    candidates = dict(position.top)
    candidates.setdefault(position.token, position.logprob)
    for token, logprob in candidates.items():
        label = normalize_token(token)
        if label in labels and logprob is not None and math.isfinite(logprob):
            mass[label] = mass.get(label, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None, 0.0
    return {k: v / total for k, v in sorted(mass.items())}, total


def token_index_at_char(logprobs: Sequence[TokenLogprobs], text: str, char_index: int) -> int | None:
    """Index of the generated token covering ``text[char_index]``, or None."""
    pieces = [p.token for p in logprobs]
    if "".join(pieces) == text:  # the tokens spell the text: the one whose characters hold ``char_index``
        ends = list(itertools.accumulate(map(len, pieces)))
        return next((i for i, end in enumerate(ends) if end - len(pieces[i]) <= char_index < end), None)
    want = text[char_index] if 0 <= char_index < len(text) else None  # else the last token that is that character
    return next((i for i in reversed(range(len(pieces))) if normalize_token(pieces[i]) == want), None)


def verdict_distribution(
    logprobs: Sequence[TokenLogprobs] | None, text: str, verdict_start: int | None, labels: Sequence[str]
) -> tuple[dict[str, float] | None, float | None]:
    """Distribution over ``labels`` at the token that carried the parsed verdict."""
    index = token_index_at_char(logprobs, text, verdict_start) if logprobs and verdict_start is not None else None
    if logprobs is None or index is None:
        return None, None
    probs, mass = distribution_at(logprobs[index], labels)
    return probs, (mass if probs is not None else None)


def first_verdict_distribution(
    logprobs: Sequence[TokenLogprobs] | None, labels: Sequence[str], lookahead: int = 3
) -> tuple[dict[str, float] | None, float | None]:
    """For a forced verdict: the first of the next ``lookahead`` positions whose top-k holds a label."""
    for position in (logprobs or [])[:lookahead]:
        probs, mass = distribution_at(position, labels)
        if probs is not None:
            return probs, mass
        if normalize_token(position.token) not in ("", "(", "[", '"', ":"):
            break
    return None, None


EXPECTED_FIX = (
    "fix: a judge server or engine that returns logprobs (vLLM serves up to 20 with --max-logprobs 20 or more; the "
    "judge asks for 20), or score the verdicts themselves (score='mean'; prom-reward grade without --expected)"
)
NO_LOGPROBS = "the judge returned no logprobs for the verdict token"  # how no_expected begins without any


def no_logprobs(reason: str | None) -> bool:
    """Whether ``reason`` (a ``Grade.expected_reason``) says the judge returned no logprobs at all."""
    return reason is not None and reason.startswith(NO_LOGPROBS)


def no_expected(scored_tokens: int) -> str:
    """Why a verdict has no expected score, ``scored_tokens`` its samples' tokens with logprobs: none returned, or
    none of the verdict labels among the verdict token's top ones."""
    if scored_tokens == 0:
        return f"{NO_LOGPROBS}, so there is no expected score; {EXPECTED_FIX}"
    return (
        "the judge's top logprobs at the verdict token hold none of the verdict labels, so there is no expected "
        f"score; {EXPECTED_FIX}"
    )


def expected_value(probs: dict[str, float] | None) -> float | None:
    """Sum of k * P(k) for numeric labels."""
    return sum(int(k) * p for k, p in probs.items()) if probs else None
