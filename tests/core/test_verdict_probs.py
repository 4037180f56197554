"""Verdict distributions from token logprobs."""

import math

import pytest

from prom_reward.backends.base import TokenLogprobs
from prom_reward.core.sampler import (
    distribution_at,
    expected_value,
    first_verdict_distribution,
    normalize_token,
    token_index_at_char,
    verdict_distribution,
)
from prom_reward.format.judge_format import get_judge_format

ABSOLUTE_LABELS = get_judge_format("prometheus2").verdict_labels("absolute")


def pos(token, probs):
    return TokenLogprobs(token, math.log(probs[token]), {k: math.log(v) for k, v in probs.items()})


@pytest.mark.parametrize("tok, want", [(" 4", "4"), ("\u25814", "4"), ("\u0120B", "B"), ("4\n", "4"), ("(", "(")])
def test_normalize_token(tok, want):
    assert normalize_token(tok) == want


def test_variants_of_the_same_label_are_summed():
    probs, mass = distribution_at(pos("4", {"4": 0.4, " 4": 0.2, "5": 0.2, "and": 0.2}), ABSOLUTE_LABELS)
    assert probs == pytest.approx({"4": 0.75, "5": 0.25}) and mass == pytest.approx(0.8)


def test_no_label_in_top_k_gives_none():
    assert distribution_at(pos("x", {"x": 0.9, "y": 0.1}), ABSOLUTE_LABELS) == (None, 0.0)


def test_token_index_at_char_uses_offsets():
    lps = [pos("Fine", {"Fine": 1.0}), pos(" [RESULT]", {" [RESULT]": 1.0}), pos(" 4", {" 4": 0.9, " 5": 0.1})]
    text = "Fine [RESULT] 4"
    assert token_index_at_char(lps, text, text.index("4")) == 2
    probs, mass = verdict_distribution(lps, text, text.index("4"), ABSOLUTE_LABELS)
    assert probs == pytest.approx({"4": 0.9, "5": 0.1})


def test_token_index_falls_back_when_tokens_do_not_concatenate():
    lps = [pos("Fine", {"Fine": 1.0}), pos("4", {"4": 1.0}), pos("</s>", {"</s>": 1.0})]
    assert token_index_at_char(lps, "Fine [RESULT] 4", 14) == 1


def test_first_verdict_distribution_skips_a_whitespace_token():
    lps = [pos("\u2581", {"\u2581": 0.9, "5": 0.1}), pos("3", {"3": 0.6, "4": 0.4})]
    # first position already has a label ("5"), so it is used
    assert first_verdict_distribution(lps, ABSOLUTE_LABELS)[0] == {"5": 1.0}
    lps2 = [pos("\u2581", {"\u2581": 1.0}), pos("3", {"3": 0.6, "4": 0.4})]
    assert first_verdict_distribution(lps2, ABSOLUTE_LABELS)[0] == pytest.approx({"3": 0.6, "4": 0.4})
    lps3 = [pos("Hmm", {"Hmm": 1.0}), pos("3", {"3": 1.0})]
    assert first_verdict_distribution(lps3, ABSOLUTE_LABELS) == (None, None)


def test_expected_value():
    assert expected_value({"1": 0.5, "5": 0.5}) == 3.0
    assert expected_value(None) is None
