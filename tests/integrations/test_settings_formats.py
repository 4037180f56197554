"""The framework settings ask the judge format whether the rubric fits (issue 33 item 1): the configured
``format``, else the preset format of the judge ``model``, else the default."""

from __future__ import annotations

import pytest

from prom_reward.errors import ConfigError
from prom_reward.integrations.settings import RewardSettings

THREE = {"criteria": "Is it right?", "descriptions": ["wrong", "partly right", "right"]}


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        ({"format": "flow-judge-3"}, "flow-judge-3 grades need 3 score descriptions"),
        ({"format": "flow-judge-3", "rubric": THREE}, None),
        ({"format": "flow-judge-binary", "rubric": THREE}, "flow-judge-binary grades need 2"),
        ({"model": "flowaicom/Flow-Judge-v0.1"}, None),  # its preset's flow-judge: 5 descriptions fit
        ({"model": "flowaicom/Flow-Judge-v0.1", "rubric": THREE}, "flow-judge grades need 5"),
        ({"rubric": {"criteria": "Kind?"}}, "prometheus2 grades need 5"),
        ({"mode": "pairwise_group", "group_size": 2, "rubric": {"criteria": "Kind?"}}, None),  # verdicts: any
        (
            {"model": "gaotang/RM-R1-Qwen2.5-Instruct-7B", "mode": "pairwise_group", "group_size": 2, "rubric": THREE},
            None,
        ),
    ],
)
def test_the_rubric_is_checked_by_the_judges_format(given, refused):
    if refused is None:
        s = RewardSettings.load({"failure_reward": 0, **given}, env={})
        assert s.reward.rubric is not None
        return
    with pytest.raises(ConfigError, match=f"rubric: .*{refused}.*\\[--rubric"):
        RewardSettings.load({"failure_reward": 0, **given}, env={})
