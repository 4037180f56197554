"""The Con-J format (prom_reward.format.formats.con_j): its prompt byte for byte against rewardbench 0.1.4
(``model_modifier="Con-J"``), and its strict JSON verdict against a table where each row also states what
rewardbench's ``con_j_evaluate`` returns (rows that differ are the documented differences)."""

from __future__ import annotations

import pytest

import prom_reward.format.formats  # noqa: F401  (registers the formats)
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import get_judge_format
from tests.format.pairwise_items import ITEMS, MULTILINE_RUBRIC, Item, conversation

CON_J = get_judge_format("con-j")


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i.id)
def test_prompt_is_rewardbench_byte_for_byte(rewardbench_generative, item: Item) -> None:
    system, user = rewardbench_generative.format_judge_answers(
        item.instruction,
        conversation(item.instruction, item.response_a),
        conversation(item.instruction, item.response_b),
        multi_turn=False,
        model_modifier="Con-J",
    )
    prompt = CON_J.relative_prompt(item.instruction, item.response_a, item.response_b, item.rubric, item.reference)
    assert (prompt.system, prompt.user) == (system, user)


# (text, our verdict, rewardbench's con_j_evaluate)
TABLE = [
    ('{"原因": "回答1更准确", "更好的回答": 1}', "A", "A"),
    ('```json\n{"原因": "回答2更全面", "更好的回答": 2}\n```', "B", "B"),
    ('{"原因": "理由", "更好的回答": "2"}', "B", "B"),
    ('{"原因": "理由", "更好的回答": "２"}', "B", "B"),
    ('{"原因": "回答1\n更好", "更好的回答": 1}', "A", "A"),
    ('{"原因": "x", "更好的回答": 2}<|im_end|>', "B", "B"),
    ('{"更好的回答": 1, "原因": "顺序不同"}', "A", "A"),
    ('{"原因": "理由", "更好的回答": 3}', None, "None"),
    ('{"原因": "两个都好", "更好的回答": "1或2"}', None, "None"),
    ('{"原因": "理由"}', None, "None"),
    ('{"原因": "理由", "更好的回答": true}', None, "None"),
    ("两个回答都不好。", None, "None"),
    ('{"原因": "理由", "更好的回答": 1', None, "A"),  # unclosed object
    ("我认为更好的回答是2", None, "B"),  # prose, no JSON
    ('{"原因": "理由", "更好的回答": 1} 不对，应该是2', None, "A"),  # text after the object
    ('{"原因": "理由", "更好的回答": 1, "更好的回答": 2}', None, "B"),  # two verdicts
    ('Here: {"原因": "x", "更好的回答": 2}', None, "B"),  # prose before the object
    ('{"原因": "不是\\"更好的回答\\": 1", "更好的回答": 2}', "B", "B"),  # the key echoed inside the reason
]


@pytest.mark.parametrize(("text", "ours", "peer"), TABLE)
def test_parse_table(rewardbench_generative, text: str, ours: str | None, peer: str) -> None:
    parsed = CON_J.parse(text, "relative")
    assert parsed.verdict == ours
    if ours is None:
        assert parsed.reason is not None and parsed.reason.startswith("con-j: ")
    else:
        assert parsed.reason is None and text[parsed.verdict_start] in {"A": "1１", "B": "2２"}[ours]
    assert rewardbench_generative.con_j_evaluate(text) == peer


def test_feedback_is_the_reason_string() -> None:
    assert CON_J.parse('{"原因": " 回答2更全面 ", "更好的回答": 2}', "relative").feedback == "回答2更全面"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("我认为更好的回答是2", "expected one JSON object"),
        ('{"原因": "x", "更好的回答": 1', "does not parse"),
        ('{"原因": "x"}', "has no '更好的回答' key"),
        ('{"原因": "x", "更好的回答": 3}', "is 3, expected 1 or 2"),
        ('{"更好的回答": 1, "更好的回答": 2}', "two '更好的回答' keys"),
        ('{"更好的回答": 1} 2', "text follows the JSON object"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deep to read"),  # raised RecursionError
        ('{"更好的回答": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep to read"),
    ],
)
def test_failure_reasons(text: str, needle: str) -> None:
    reason = CON_J.parse(text, "relative").reason
    assert reason is not None and needle in reason


def test_no_forced_verdicts_and_labels_are_the_answer_numbers() -> None:
    assert CON_J.force_prefix is None
    assert CON_J.verdict_labels("relative") == ("1", "2")
    assert CON_J.tasks == frozenset({"relative"}) and CON_J.scale == ()


def test_grading_is_refused_naming_what_it_supports() -> None:
    with pytest.raises(ConfigError, match="'con-j' does not judge absolute .*it supports relative"):
        CON_J.absolute_prompt("q", "r", MULTILINE_RUBRIC, None)
