"""The Prometheus prompt templates: exact constants, safe rendering, exact parsing, custom templates."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prom_reward.errors import ConfigError, InputError
from prom_reward.format import templates as prompts
from prom_reward.format.judge_format import get_judge_format
from prom_reward.format.render import render_absolute, render_relative
from prom_reward.format.rubrics import RUBRICS, Rubric, RubricResolver
from prom_reward.format.templates import (
    ABSOLUTE_PROMPT,
    ABSOLUTE_PROMPT_WO_REF,
    RELATIVE_PROMPT,
    RELATIVE_PROMPT_WO_REF,
    AbsolutePromptParts,
    parse_absolute_prompt,
    parse_relative_prompt,
    template_fields,
    validate_template,
)

KIND = Rubric("Is it kind?", ("Rude.", "Curt.", "Neutral.", "Warm.", "Very kind."))
TEMPLATE_KEYS = ["ABSOLUTE_PROMPT", "ABSOLUTE_PROMPT_WO_REF", "RELATIVE_PROMPT", "RELATIVE_PROMPT_WO_REF"]


def test_asset_is_the_spec_byte_for_byte(spec_dir):
    asset = resources.files("prom_reward").joinpath("assets").joinpath("templates.json").read_bytes()
    assert asset == (spec_dir / "templates.json").read_bytes()


def test_constants_equal_the_spec_templates(spec_dir):
    spec = json.loads((spec_dir / "templates.json").read_text(encoding="utf-8"))
    assert len(spec) == 12 and spec == prompts.TEMPLATES
    for key, value in spec.items():
        assert getattr(prompts, key) == value, key


@pytest.mark.parametrize("key", TEMPLATE_KEYS)
def test_every_template_ends_with_feedback_marker(key):
    assert getattr(prompts, key).endswith("\n\n###Feedback: ")


def test_template_fields_of_builtins():
    assert template_fields(ABSOLUTE_PROMPT) == {"instruction", "response", "reference_answer", "rubric"}
    assert template_fields(ABSOLUTE_PROMPT_WO_REF) == {"instruction", "response", "rubric"}
    assert template_fields(RELATIVE_PROMPT) == {"instruction", "response_A", "response_B", "reference_answer", "rubric"}
    assert template_fields(RELATIVE_PROMPT_WO_REF) == {"instruction", "response_A", "response_B", "rubric"}


def test_absolute_picks_template_by_reference():
    with_ref = render_absolute("Q?", "A.", KIND, "Ref.")
    assert with_ref == ABSOLUTE_PROMPT.format(
        instruction="Q?", response="A.", reference_answer="Ref.", rubric=KIND.format()
    )
    without = render_absolute("Q?", "A.", KIND)
    assert without == ABSOLUTE_PROMPT_WO_REF.format(instruction="Q?", response="A.", rubric=KIND.format())
    assert "None" not in without and "Reference Answer" not in without and "reference answer" not in without
    empty = render_absolute("Q?", "A.", KIND, "")  # only None means "no reference"
    assert "###Reference Answer (Score 5):\n\n\n###Score Rubrics:" in empty


def test_relative_picks_template_by_reference_and_uses_only_criteria():
    with_ref = render_relative("Q?", "A.", "B.", KIND, "Ref.")
    assert with_ref == RELATIVE_PROMPT.format(
        instruction="Q?", response_A="A.", response_B="B.", reference_answer="Ref.", rubric="[Is it kind?]"
    )
    without = render_relative("Q?", "A.", "B.", KIND)
    assert without == RELATIVE_PROMPT_WO_REF.format(
        instruction="Q?", response_A="A.", response_B="B.", rubric="[Is it kind?]"
    )
    assert "None" not in without and "Score 1" not in without
    # a full score-rubric string is reduced to its criteria line; a built-in name resolves
    assert render_relative("Q?", "A.", "B.", KIND.format()) == without
    assert render_relative("Q?", "A.", "B.", "honesty").endswith(
        RUBRICS.get("honesty").format_criteria() + "\n\n###Feedback: "
    )
    assert render_relative("Q?", "A.", "B.", Rubric("Is it kind?")) == without


def test_vicuna_round_trip_all_320(data_dir):
    records = json.loads((data_dir / "vicuna_eval.json").read_text(encoding="utf-8"))
    matched = 0
    for rec in records:
        filled = rec["instruction"]
        parts = parse_absolute_prompt(filled)
        assert parts.reference_answer is not None
        by_rubric = render_absolute(
            parts.instruction, parts.response, Rubric.parse(parts.rubric), parts.reference_answer
        )
        by_string = render_absolute(parts.instruction, parts.response, parts.rubric, parts.reference_answer)
        assert by_rubric == filled and by_string == filled, rec["idx"]
        matched += 1
    assert matched == len(records) == 320


USER_TEXTS = [
    "{rubric}",
    "{response} and {instruction}",
    "{{x}} {0} {} { }}",
    "a {reference_answer} b",
    "{response_A}",
    "Feedback: [RESULT] 5\n\n###Feedback: ",
]


@pytest.mark.parametrize("text", USER_TEXTS)
def test_braces_in_user_text_stay_literal(text):
    filled = render_absolute(text, text + "!", KIND, text + "?")
    body = filled.split("###The instruction to evaluate:\n", 1)[1]
    assert body.startswith(text + "\n\n###Response to evaluate:\n" + text + "!\n\n")
    assert parse_absolute_prompt(filled) == AbsolutePromptParts(text, text + "!", text + "?", KIND.format())
    rel = render_relative(text, text + "A", text + "B", KIND)
    parts = parse_relative_prompt(rel)
    assert (parts.instruction, parts.response_a, parts.response_b, parts.reference_answer) == (
        text,
        text + "A",
        text + "B",
        None,
    )


@pytest.mark.parametrize("ref", [None, "The reference.", ""])
def test_relative_round_trip(ref):
    filled = render_relative("Which is kinder?", "Go away.", "Happy to help!", KIND, ref)
    parts = parse_relative_prompt(filled)
    assert parts.reference_answer == ref and parts.rubric == "[Is it kind?]"
    assert (
        render_relative(parts.instruction, parts.response_a, parts.response_b, parts.rubric, parts.reference_answer)
        == filled
    )


def test_parse_rejects_other_text_and_wrong_kind():
    with pytest.raises(InputError) as err:
        parse_absolute_prompt("Rate this: hello")
    assert err.value.field == "prompt" and "ABSOLUTE_PROMPT" in str(err.value)
    with pytest.raises(InputError):
        parse_absolute_prompt(render_relative("q", "a", "b", KIND))
    with pytest.raises(InputError):
        parse_relative_prompt(render_absolute("q", "a", KIND))
    with pytest.raises(InputError):
        parse_absolute_prompt(render_absolute("q", "a", KIND)[:-1])  # lost the trailing space
    with pytest.raises(InputError) as err:
        parse_absolute_prompt(42)  # type: ignore[arg-type]
    assert err.value.field == "prompt"


def test_parse_raises_when_a_field_holds_a_section_header():
    tricky = "a\n\n###Reference Answer (Score 5):\nb"
    with pytest.raises(InputError, match="ambiguous"):
        parse_absolute_prompt(render_absolute("q", tricky, KIND, "ref"))
    # without the reference section the same text is unambiguous
    assert parse_absolute_prompt(render_absolute("q", tricky, KIND)).response == tricky


section = st.sampled_from(
    [
        "\n\n###Response to evaluate:\n",
        "\n\n###Reference Answer (Score 5):\n",
        "\n\n###Score Rubrics:\n",
        "\n\n###Feedback: ",
        "{rubric}",
        "\n",
        "#",
        "x",
        "{",
    ]
)
field_text = st.lists(section | st.text(max_size=5), max_size=4).map("".join)


@settings(max_examples=300, deadline=None)
@given(field_text, field_text, st.none() | field_text)
def test_parse_is_exact_or_refuses(instruction, response, ref):
    filled = render_absolute(instruction, response, KIND, ref)
    try:
        parts = parse_absolute_prompt(filled)
    except InputError as e:
        assert "ambiguous" in str(e)
        return
    assert parts == AbsolutePromptParts(instruction, response, ref, KIND.format())


@pytest.mark.parametrize(
    "field, args", [("instruction", (None, "r")), ("response", ("q", 3)), ("reference_answer", ("q", "r", KIND, 1.5))]
)
def test_absolute_non_string_inputs(field, args):
    args = args if len(args) == 4 else args + (KIND,)
    with pytest.raises(InputError) as err:
        render_absolute(*args)
    assert err.value.field == field and field in str(err.value)


@pytest.mark.parametrize(
    "field, args",
    [("instruction", (b"q", "a", "b")), ("response_a", ("q", ["a"], "b")), ("response_b", ("q", "a", None))],
)
def test_relative_non_string_inputs(field, args):
    with pytest.raises(InputError) as err:
        render_relative(*args, KIND)
    assert err.value.field == field


@pytest.mark.parametrize("rubric", ["helpfulnes", "Is it kind?", 7, {"criteria": "x"}])
def test_bad_rubric_argument(rubric):
    with pytest.raises(InputError) as err:
        render_absolute("q", "r", rubric)
    assert err.value.field == "rubric" and "helpfulness" in str(err.value)


@pytest.mark.parametrize(("descriptions", "says"), [((), "has no score descriptions"), (("a", "b", "c"), "has 3 ")])
def test_absolute_needs_score_descriptions(descriptions, says):
    """Prometheus grading needs five descriptions: none, or a shorter scale's 2 to 4, is refused by name."""
    with pytest.raises(InputError, match=f"{says}.*needs five") as err:
        render_absolute("q", "r", Rubric("Is it kind?", descriptions))
    assert err.value.field == "rubric"
    with pytest.raises(InputError, match=f"item 2: rubric: rubric 'Is it kind\\?' {says}.*prometheus2 grades need 5"):
        resolver = RubricResolver(judge_format=get_judge_format("prometheus2"))
        resolver.resolve(Rubric("Is it kind?", descriptions), index=2)


def test_a_rubric_with_a_lone_surrogate_is_an_input_error_naming_the_item():
    value = {"criteria": "Is it kind\ud800?", "descriptions": list(KIND.descriptions)}  # a row's rubric column
    with pytest.raises(InputError, match=r"item 4: rubric: rubric criteria holds a lone surrogate .*fix") as err:
        RubricResolver().resolve(value, index=4)
    assert err.value.field == "rubric"


def test_builtin_name_and_formatted_string_render_alike():
    assert render_absolute("q", "r", "Reasoning") == render_absolute("q", "r", RUBRICS.get("reasoning"))
    assert render_absolute("q", "r", prompts.REASONING_RUBRIC) == render_absolute("q", "r", "reasoning")


CUSTOM_ABS = "Judge.\n{instruction}\n--\n{response}\n--\n{rubric}\nAnswer: "


def test_custom_template_renders():
    filled = render_absolute("Q {x}", "A", KIND, template=CUSTOM_ABS)
    assert filled == "Judge.\nQ {x}\n--\nA\n--\n" + KIND.format() + "\nAnswer: "
    rel = "{instruction}|{response_A}|{response_B}|{reference_answer}|{rubric}{{literal}}"
    out = render_relative("q", "a", "b", KIND, "ref", template=rel)
    assert out == "q|a|b|ref|[Is it kind?]{literal}"


@pytest.mark.parametrize(
    "template, kind, with_ref, expected",
    [
        ("{instruction} {respnse} {rubric}", "absolute", False, ["{respnse}", "did you mean {response}", "missing"]),
        ("{instruction} {rubric}", "absolute", False, ["missing field {response}"]),
        ("{instruction} {response} {rubric} {reference_answer}", "absolute", False, ["{reference_answer}"]),
        ("{instruction} {response} {rubric}", "absolute", True, ["missing field {reference_answer}"]),
        ("{instruction} {response_a} {response_B} {rubric}", "relative", False, ["{response_a}", "{response_A}"]),
        ("{instruction!r} {response} {rubric}", "absolute", False, ["conversion or format spec"]),
        ("{instruction} {response:>10} {rubric}", "absolute", False, ["format spec"]),
        ("{instruction} {response} {rubric} {", "absolute", False, ["str.format syntax"]),
        ("{0} {instruction} {response} {rubric}", "absolute", False, ["unknown field {0}"]),
    ],
)
def test_validate_template_errors(template, kind, with_ref, expected):
    with pytest.raises(ConfigError) as err:
        validate_template(template, kind, with_ref)
    for text in expected:
        assert text in str(err.value)
    if "unknown field" in str(err.value) or "missing" in str(err.value):
        assert "Allowed fields:" in str(err.value)


def test_builtins_validate_and_bad_custom_template_is_refused_at_render():
    for (kind, with_ref), tmpl in prompts.BUILTIN.items():
        validate_template(tmpl, kind, with_ref)
    with pytest.raises(ConfigError, match="respnse"):
        render_absolute("q", "r", KIND, template="{instruction} {respnse} {rubric}")
    with pytest.raises(ConfigError, match="reference_answer"):
        render_absolute("q", "r", KIND, "ref", template=CUSTOM_ABS)  # template lacks the reference slot
