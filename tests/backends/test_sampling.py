"""SamplingConfig: paper defaults, validation, key-by-key merging."""

import pytest

from prom_reward import ConfigError, SamplingConfig


def test_paper_defaults():
    c = SamplingConfig()
    assert (c.temperature, c.top_p, c.repetition_penalty, c.max_tokens) == (1.0, 0.9, 1.03, 1024)


def test_merge_changes_only_given_keys():
    c = SamplingConfig().merged({"temperature": 0})
    assert c.temperature == 0 and c.max_tokens == 1024 and c.top_p == 0.9


def test_merge_with_config_replaces_whole():
    other = SamplingConfig(max_tokens=5)
    assert SamplingConfig().merged(other) is other


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -1},
        {"top_p": 0},
        {"top_p": 1.5},
        {"max_tokens": 0},
        {"logprobs": 21},
        {"top_k": 0},
        {"repetition_penalty": 0},
        {"temperature": float("nan")},  # was accepted: NaN passes no comparison
        {"temperature": float("inf")},
        {"top_p": float("nan")},
        {"repetition_penalty": float("nan")},
        {"temperature": True},
        {"top_k": True},
    ],
)
def test_invalid_values_name_the_field(bad):
    key = next(iter(bad))
    with pytest.raises(ConfigError, match=key):
        SamplingConfig().merged(bad)


def test_unknown_key_lists_valid_options():
    with pytest.raises(ConfigError, match="max_new_tokens.*closest: max_new_tokens -> max_tokens.*valid: .*max_tokens"):
        SamplingConfig().merged({"max_new_tokens": 3})


def test_stop_string_becomes_tuple():
    assert SamplingConfig(stop="</s>").stop == ("</s>",)
