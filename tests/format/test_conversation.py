"""TRL rows made judge text (``prom_reward.format.conversation``): message lists of every shape, and the
malformed ones refused with an ``InputError`` naming the item and the field, never a ``TypeError``."""

from __future__ import annotations

import pytest

from prom_reward import InputError, PrometheusJudge
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.rewards.reward import PrometheusReward


def _parts(*parts: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": list(parts)}]


@pytest.mark.parametrize(
    "messages, text",
    [
        ("plain", "plain"),
        ([{"role": "user", "content": "Hi?"}], "Hi?"),
        ([{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi?"}], "Hi?"),
        (_parts({"type": "text", "text": "a"}, {"type": "image"}, "raw", {"type": "text", "text": "b"}), "ab"),
    ],
)
def test_a_prompt_becomes_its_text(messages, text):
    assert prompt_text(messages) == text


@pytest.mark.parametrize(
    "messages, says",
    [
        (_parts({"type": "text", "text": None}), "content part 'text' must be text, got NoneType (None); fix: "),
        (_parts({"type": "text", "text": 5}), "content part 'text' must be text, got int (5)"),
        (_parts({"type": "text", "text": {"nested": 1}}), "content part 'text' must be text, got dict"),
        ([{"role": "user", "content": None}], "message content must be text, got NoneType"),
        ([{"role": "user"}], "messages must be dicts with 'role' and 'content'"),
        (["x"], "messages must be dicts with 'role' and 'content', got 'x'"),
    ],
)
@pytest.mark.parametrize("read, field", [(prompt_text, "prompt"), (completion_text, "completion")])
def test_a_malformed_message_is_an_input_error_naming_the_item_and_field(read, field, messages, says):
    with pytest.raises(InputError) as e:
        read(messages, 3)
    assert str(e.value).startswith(f"item 3: {field} ") and says in str(e.value)
    assert (e.value.index, e.value.field) == (3, field)
    with pytest.raises(InputError) as e:
        read(messages)  # without an index, no "item None"
    assert str(e.value).startswith(f"{field} ")


def test_one_sample_with_a_malformed_text_part_fails_alone_in_a_reward():
    judge = PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"] * 4)
    good = [{"role": "assistant", "content": "fine"}]
    bad = [{"role": "assistant", "content": [{"type": "text", "text": None}]}]
    prompts = [[{"role": "user", "content": "q"}]] * 2
    assert PrometheusReward(judge)(prompts=prompts, completions=[good, bad]) == [4.0, None]
