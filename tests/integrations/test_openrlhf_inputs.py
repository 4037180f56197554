"""OpenRLHF's inputs on their own: a query split into its response (whole or left-truncated prompt), labels as
reference answers or dict columns, and the failure policy and server health the replies are built with."""

from __future__ import annotations

import pytest

from prom_reward.errors import ConfigError, InputError
from prom_reward.integrations.batched_reward import FailurePolicy
from prom_reward.integrations.openrlhf_func import label_fields, reference_text, split_query
from prom_reward.integrations.openrlhf_server import ServerHealth
from prom_reward.rewards.config import RewardConfig
from prom_reward.rewards.outage import JudgeHealth


def test_split_query_whole_and_left_truncated_prompt():
    assert split_query("Q: hi A: hello<|im_end|>", "Q: hi A:", strip=["<|im_end|>"]) == ("hello", False)
    assert split_query("ong prompt. Answer: 42</s>", "A long prompt. Answer:", strip=["</s>"]) == ("42", True)
    with pytest.raises(InputError, match="does not start with its prompt"):
        split_query("something else entirely", "A long prompt. Answer:")


def test_labels_as_reference_answers_and_dict_columns():
    assert reference_text(["4", 4.0], "label") == "4\n4.0" and reference_text("", "label") is None
    assert label_fields(["4", 4.0]) == {"reference_answer": "4\n4.0"}
    assert label_fields({"reference_answer": "Paris", "rubric": "factuality"}) == {
        "reference_answer": "Paris",
        "rubric": "factuality",
    }
    assert label_fields(None) == {}


def test_failure_policy_on_the_rewards_scale():
    assert FailurePolicy("min").value_for(RewardConfig(normalize="symmetric")) == -1.0
    assert FailurePolicy("0.25").value_for(RewardConfig()) == 0.25
    with pytest.raises(ConfigError, match="not set"):
        FailurePolicy(None)


def test_server_health_degrades_on_the_failure_share_and_fails_when_misconfigured():
    h = ServerHealth(JudgeHealth(), degraded_failure_share=0.5)
    h.record([True] * 6 + [False] * 4)
    assert h.status()["status"] == "degraded" and h.status()["recent_failure_share"] == 0.6
    h.misconfigured("judge http://j:8000: HTTP 404")
    assert h.status()["status"] == "failing" and h.status()["cause"] == "judge http://j:8000: HTTP 404"
