"""prom_reward.format.eos: the one list of end-of-sequence tokens, read the same way by the verdict parser
and by the sampler's forcing of a verdict."""

from __future__ import annotations

import pytest

from prom_reward.core.sampler import forced_text
from prom_reward.format.eos import EOS_TOKENS, content_end, strip_eos
from prom_reward.format.formats.prometheus2 import PROMETHEUS2
from prom_reward.format.parsing import parse_absolute, parse_relative

# (text, strip, end): where the content ends
END_TABLE = [
    ("Good. [RESULT] 4", "", 16),
    ("Good. [RESULT] 4</s>", "", 16),
    ("Good. [RESULT] 4 </s>\n", "", 16),
    ("Good. [RESULT] 4<|im_end|><|endoftext|>", "", 16),
    ("Good. [RESULT] 4<eos> \n<end_of_turn>", "", 16),
    ("Good. [RESULT] 4.</s>", "", 17),  # the dot is content unless stripped
    ("Good. [RESULT] 4.</s>", ".!", 16),
    ("Good. [RESULT] 4!.<|eot_id|>!", ".!", 16),  # stripped in any order
    ("</s>", "", 0),
    ("", "", 0),
    ("A</s>B", "", 6),  # only a trailing token counts
    ("end_of_text", "", 11),  # the word alone is not the token
]


@pytest.mark.parametrize("text,strip,end", END_TABLE)
def test_content_end(text: str, strip: str, end: int) -> None:
    assert content_end(text, strip) == end
    assert strip_eos(text) == text[: content_end(text)]


@pytest.mark.parametrize("token", EOS_TOKENS)
def test_every_token_is_read_past_by_the_parser_and_the_sampler(token: str) -> None:
    assert parse_absolute(f"Fine work. [RESULT] 4{token}\n") == 4
    assert parse_relative(f"B is clearer. [RESULT] B {token}") == "B"
    # an output cut at an open marker before the token is forced from the marker on
    cut = f"Fine work. [RESULT]{token}"
    assert forced_text(PROMETHEUS2, cut) == "Fine work. [RESULT] "
    assert forced_text(PROMETHEUS2, f"Fine work. [RESULT] 4{token}") is None
    cut_short = f"Fine work, but{token}"
    assert forced_text(PROMETHEUS2, cut_short) == "Fine work, but [RESULT] "


def test_the_tokens_are_distinct_and_not_whitespace() -> None:
    assert len(set(EOS_TOKENS)) == len(EOS_TOKENS) == 8
    assert all(t.strip() == t and t for t in EOS_TOKENS)
