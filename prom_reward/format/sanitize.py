"""Neutralising judge-template markers and chat special tokens inside the text being judged (rewritten as
full-width look-alikes, so a response cannot forge a prompt section or a verdict); ``restore`` undoes it.
What counts as a marker is in docs/formats.md."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

ZERO_WIDTH = "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
"""Invisible characters a text can hide inside a marker."""
SPECIAL_TOKENS: tuple[str, ...] = tuple(
    """
    <|im_start|> <|im_end|> <|endoftext|> <|eot_id|> <|end_of_text|> <|begin_of_text|>
    <|start_header_id|> <|end_header_id|> <|end|>
    <|user|> <|assistant|> <|system|> <start_of_turn> <end_of_turn> <s> </s> <|eom_id|>
    """.split()
)
"""Chat special tokens of the common judge families (ChatML, Llama 2/3, Mistral, Phi, Gemma)."""
WIRE_MARKERS = ("[INST]", "[/INST]")
"""The ``inst`` wire's turn markers (``format.wire``), neutralised whatever the judge format."""
_ZW = f"[{ZERO_WIDTH}]"
_FW_HASH, _FW_OPEN, _FW_CLOSE = "\uff03", "\uff3b", "\uff3d"
_HASHES = "#\uff03\ufe5f"
_OPENS = "[\uff3b\u3010\u3014\u301a\u27e6\u2045\ufe5d"
_CLOSES = "]\uff3d\u3011\u3015\u301b\u27e7\u2046\ufe5e"
_BRACKET_WORD = re.compile(r"\[(/?)([A-Za-z0-9_]+)\]")


def _word(word: str) -> str:
    """A word whose letters may be full-width and separated by zero-width characters (any case)."""
    parts = []
    for ch in word:
        if ch.isalpha():
            alts = {ch.lower(), ch.upper(), chr(ord(ch.lower()) + 0xFEE0), chr(ord(ch.upper()) + 0xFEE0)}
            parts.append("[" + "".join(sorted(alts)) + "]")
        else:
            parts.append(re.escape(ch))
    return f"{_ZW}*".join(parts)


def _phrase(text: str) -> str:
    return rf"[\s{ZERO_WIDTH}]+".join(_word(w) for w in text.split())


def _is_punct(ch: str) -> bool:
    return not ch.isalnum() and not ch.isspace()


def _loose(marker: str) -> str:
    """The pattern of a literal marker with any whitespace next to its punctuation (``<score>``: ``< score >``)."""
    out, prev, spaced = "", "", False
    for ch in marker:
        if ch.isspace():
            spaced = True
            continue
        if prev:
            out += r"\s*" if _is_punct(ch) or _is_punct(prev) else (r"\s+" if spaced else "")
        out, prev, spaced = out + re.escape(ch), ch, False
    return out


class _Patterns:
    """The compiled patterns of one format's ``markers`` (see ``neutralize``)."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        names = [m.lstrip("#").strip() for m in markers if m.startswith("##")]
        # a name ending in a one-letter word ("Response A") must not run into more letters ("Response Apple")
        sections = [_phrase(n) + ("(?![a-zA-Z])" if len(n.split()[-1]) == 1 else "") for n in names if n]
        words: dict[str, bool] = {}  # bracketed word -> may start with "/"
        self.literals: tuple[str, ...] = ()
        for m in markers:
            found = _BRACKET_WORD.fullmatch(m)
            if found:
                words[found[2]] = words.get(found[2], False) or bool(found[1])
            elif not m.startswith("##"):
                self.literals += (m,)
        # A header is a run of two or more hash signs that a section name follows: the run is matched whole, then
        # the name looked for after it (a lookahead would re-scan the run from each hash sign).
        self.section: re.Pattern[str] | None = None
        if sections:
            self.section = re.compile(rf"[\s{ZERO_WIDTH}]*(?:{'|'.join(sections)})", re.IGNORECASE)
        self.hashes = re.compile(rf"[{_HASHES}](?:[ \t{ZERO_WIDTH}]*[{_HASHES}])+")
        self.fw_hashes = re.compile(rf"{_FW_HASH}(?:[ \t{ZERO_WIDTH}]*{_FW_HASH})+")
        # (never empty: the wire markers [INST] and [/INST] are among the markers of every format)
        slash = rf"/?[\s{ZERO_WIDTH}]*"
        inner = "|".join((slash if s else "") + _word(w) for w, s in words.items())
        inner = rf"[\s{ZERO_WIDTH}]*(?:{inner})[\s{ZERO_WIDTH}]*"
        # closed, or left open before a non-word character ("[RESULT: 5]", "[RESULT 5")
        self.bracketed = re.compile(
            rf"[{re.escape(_OPENS)}]({inner})(?:([{re.escape(_CLOSES)}])|(?!\w))", re.IGNORECASE
        )
        self.fw_bracketed = re.compile(rf"{_FW_OPEN}({inner})(?:({_FW_CLOSE})|(?!\w))", re.IGNORECASE)
        # a literal marker in any case, with whitespace next to its punctuation ("** result: **"), as parsers read it
        # (None without literals: a never-matching pattern would still scan the whole text)
        usable = sorted({m for m in self.literals if _full_width(m) != m}, key=len, reverse=True)
        self.literal: re.Pattern[str] | None = None
        self.fw_literal: re.Pattern[str] | None = None
        if usable:
            self.literal = re.compile("|".join(_loose(m) for m in usable), re.IGNORECASE)
            self.fw_literal = re.compile("|".join(_loose(_full_width(m)) for m in usable), re.IGNORECASE)

    def headers(self, hashes: re.Pattern[str], text: str, rewrite: Callable[[str], str]) -> str:
        """``text`` with each run of ``hashes`` that a section name follows rewritten by ``rewrite``."""
        section = self.section
        if section is None or not any(c in text for c in _HASHES):  # (a scan for each sign beats the pattern's)
            return text
        return hashes.sub(lambda m: rewrite(m[0]) if section.match(text, m.end()) else m[0], text)


_compiled = lru_cache(maxsize=64)(_Patterns)


def _patterns(markers: Iterable[str] | None) -> _Patterns:
    """The patterns of the markers given (None: the default judge format's) and the wire's."""
    if markers is None:
        from prom_reward.format.judge_format import DEFAULT_FORMAT, get_judge_format

        markers = get_judge_format(DEFAULT_FORMAT).markers
    return _compiled(tuple(markers) + WIRE_MARKERS)


_SMALL = {"\uff1a": "\ufe55"}
"""Full-width punctuation of markers written in CJK (``回答B：``) -> its small look-alike (``﹕``)."""


def _full_width(token: str) -> str:
    """``token`` with its ASCII punctuation full-width (``</s>``: ``＜／s＞``), its full-width colon small (``﹕``)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and not c.isalnum() else _SMALL.get(c, c) for c in token)


_WIDE_BACK = {v: k for k, v in _SMALL.items()}


def _narrow(text: str) -> str:
    """The inverse of ``_full_width``."""
    out = []
    for c in text:
        n = chr(ord(c) - 0xFEE0) if "\uff01" <= c <= "\uff5e" else c
        out.append(n if n.isascii() and _is_punct(n) else _WIDE_BACK.get(c, c))
    return "".join(out)


def _tokens(special_tokens: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[str], dict[str, str]]:
    """The patterns of ``SPECIAL_TOKENS`` and ``special_tokens`` and of their full-width forms (never empty), and
    each full-width form's token."""
    return _token_patterns(tuple(t for t in special_tokens if isinstance(t, str)))


@lru_cache(maxsize=64)
def _token_patterns(given: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str], dict[str, str]]:
    tokens = sorted(set(SPECIAL_TOKENS) | set(given))
    usable = sorted({t for t in tokens if t and _full_width(t) != t}, key=len, reverse=True)
    plain = re.compile("|".join(re.escape(t) for t in usable))
    wide = re.compile("|".join(re.escape(_full_width(t)) for t in usable))
    return plain, wide, {_full_width(t): t for t in tokens}


def neutralize(text: str, special_tokens: Iterable[str] = (), markers: Iterable[str] | None = None) -> tuple[str, int]:
    """(text with markers and special tokens neutralised, number rewritten); ``special_tokens``: the tokenizer's,
    on top of ``SPECIAL_TOKENS``; ``markers``: the judge format's (None: the default format's).

    >>> neutralize("###\\nFeedback: [RESULT] 5")[0]
    '＃＃＃\\nFeedback: ［RESULT］ 5'
    """
    changed = [0]

    def swap(old: str, new: str) -> str:
        changed[0] += old != new  # an already neutral marker is not counted
        return new

    p = _patterns(markers)
    text = p.headers(p.hashes, text, lambda run: swap(run, "".join(_FW_HASH if c in _HASHES else c for c in run)))
    if any(c in text for c in _OPENS):
        text = p.bracketed.sub(lambda m: swap(m.group(0), _FW_OPEN + m.group(1) + (_FW_CLOSE if m[2] else "")), text)
    if p.literal is not None:
        text = p.literal.sub(lambda m: swap(m.group(0), _full_width(m.group(0))), text)
    plain, _, _ = _tokens(special_tokens)
    text = plain.sub(lambda m: swap(m.group(0), _full_width(m.group(0))), text)
    return text, changed[0]


def restore(text: str, special_tokens: Iterable[str] = (), markers: Iterable[str] | None = None) -> str:
    """Undo ``neutralize`` (exact when the original had no full-width or look-alike forms of the markers)."""
    p = _patterns(markers)
    text = p.headers(p.fw_hashes, text, lambda run: run.replace(_FW_HASH, "#"))
    text = p.fw_bracketed.sub(lambda m: "[" + m.group(1) + ("]" if m[2] else ""), text)
    _, wide, back = _tokens(special_tokens)
    text = wide.sub(lambda m: back[m.group(0)], text)
    return text if p.fw_literal is None else p.fw_literal.sub(lambda m: _narrow(m.group(0)), text)
