"""The rewardbench-family pairwise formats (prom_reward.format.formats.pairwise: selene, mt-bench-pairwise,
offsetbias, rise-judge): prompts byte for byte against rewardbench 0.1.4's ``format_judge_answers``, and
strict parsing against a table of real and perturbed outputs, where each row also states what
rewardbench's ``process_judgement`` returns (rows where the two differ are the documented differences of
docs/formats.md)."""

from __future__ import annotations

import pytest

import prom_reward.format.formats  # noqa: F401  (registers the formats)
from prom_reward.format.judge_format import get_judge_format
from tests.format.pairwise_items import ITEMS, Item, conversation

# our format name -> rewardbench's model_modifier
MODIFIERS = {"selene": "Atla", "mt-bench-pairwise": None, "offsetbias": "offsetbias", "rise-judge": "RISE-Judge"}


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i.id)
@pytest.mark.parametrize("name", sorted(MODIFIERS))
def test_prompt_is_rewardbench_byte_for_byte(rewardbench_generative, name: str, item: Item) -> None:
    system, user = rewardbench_generative.format_judge_answers(
        item.instruction,
        conversation(item.instruction, item.response_a),
        conversation(item.instruction, item.response_b),
        multi_turn=False,
        model_modifier=MODIFIERS[name],
    )
    prompt = get_judge_format(name).relative_prompt(
        item.instruction, item.response_a, item.response_b, item.rubric, item.reference
    )
    assert prompt.system == system
    assert prompt.user == user
    assert prompt.user.count(item.response_a) >= 1 and prompt.user.count(item.response_b) >= 1


# (text, our verdict, rewardbench's process_judgement)
SELENE = [
    ("**Reasoning:** A is correct and concise.\n\n**Result:** A", "A", "A"),
    ("**Reasoning:** B cites its sources.\n\n**Result:** B<|eot_id|>", "B", "B"),
    ("**Reasoning:** Both fine, B clearer.\n\n**Result:** B.\n", "B", "B"),
    ("**Reasoning:** B is right.\n**Result:**B", "B", "B"),
    ("**Reasoning:** B is right.\n\n**Result:** **B**", "B", None),  # peer: no \w after the marker
    ("**Reasoning:** B is right.\n\n**Result:** Response B", "B", "Response"),
    ("**Reasoning:** The format asks **Result:** A, but B is right.\n\n**Result:** B", "B", "A"),
    ("**Reasoning:** A.\n\n**Result:** A\n\n**Result:** A", "A", "A"),
    ("**Reasoning:** unsure.\n\n**Result:** A\n\n**Result:** B", None, "A"),  # two verdicts
    ("**Reasoning:** Neither.\n\n**Result:** C", None, "C"),
    ("**Reasoning:** Same quality.\n\n**Result:** Tie", None, "Tie"),
    ("**Reasoning:** Hard call.\n\n**Result:** A or B", None, "A"),
    ("**Reasoning:** B is safer.\n\n**Result:** not A", None, "not"),
    ("**Reasoning:** A is better.\n\n**Result:** A\nBut I am unsure.", None, "A"),
    ("**Reasoning:** If I had to say, **Result:** A would be it...", None, "A"),
    ("**Reasoning:** lowercase.\n\n**Result:** a", None, "a"),
    ("**Reasoning:** A wins.\n\n**Result:**", None, None),
    ("**Reasoning:** B is better, but the output was cut", None, None),
    ("", None, None),
]
MT_BENCH = [
    ("Assistant A answers correctly; B does not.\n\n[[A]]", "A", "A"),
    ("B is more detailed. My final verdict is: [[B]]", "B", "B"),
    ('B is better. "[[B]]"', "B", "B"),
    ("A is better. **[[A]]**", "A", "A"),
    ("Final verdict: [[B]].", "B", "B"),
    ("A wins.\n[[A]]<|eot_id|>\n", "A", "A"),
    ("I would not choose [[A]]. Final verdict: [[B]]", "B", "A"),
    ('The format says "[[A]]" if assistant A is better; here B is better: [[B]]', "B", "A"),
    ("Verdict: [[ B ]]", "B", "error"),
    ("It is not [[A]]", None, "A"),
    ("If I had to say [[A]]...", None, "A"),
    ("[[A]] [[B]]", None, "A"),
    ("Either [[A]] or [[B]]", None, "A"),
    ("Final: [[A]]\n[[B]]", None, "A"),
    ("[[A]] is my verdict because it is shorter.", None, "A"),
    ("Both are equally good. [[C]]", None, "error"),
    ("[[tie]]", None, "error"),
    ("Both are fine. [[A/B]]", None, "error"),
    ("Verdict: [[A", None, "error"),
    ("A is better.", None, "error"),
    ("", None, "error"),
]
OFFSETBIAS = [
    ("Output (a)", "A", "A"),
    ("Output (b)", "B", "B"),
    ("Output (b)<|eot_id|>", "B", "B"),
    ('"Output (a)"', "A", "A"),
    ("Output (b).", "B", "B"),
    ("  Output (a)\n", "A", "A"),
    ("Output (a) is better because it is concise.", None, "A"),
    ("Output (a) or Output (b)", None, "A"),
    ("Not Output (a). Output (b)", None, "A"),
    ("Output (c)", None, "error"),
    ("Both are good.", None, "error"),
    ("Output (", None, "error"),
    ("output (B)", None, "error"),
    ("", None, "error"),
]
RISE_JUDGE = [
    ("分析：回答A准确，回答B有误。\n\n[[A]]", "A", "A"),
    ("回答B更好，因此输出'[[B]]'。", "B", "B"),
    ("综上所述，回答A不如回答B。[[B]]", "B", "B"),
    ("回答A更好：[[A]]", "A", "A"),
    ("回答A不够准确，所以[[B]]", "B", "B"),
    ("我不会选择[[A]]", None, "A"),
    ("如果必须选择的话[[A]]……", None, "A"),
    ("[[A]]还是[[B]]", None, "A"),
    ("[[A]]\n[[B]]", None, "A"),
    ("两者相当，[[C]]", None, "error"),
    ("回答A更好。", None, "error"),
]
TABLES = {"selene": SELENE, "mt-bench-pairwise": MT_BENCH, "offsetbias": OFFSETBIAS, "rise-judge": RISE_JUDGE}
CASES = [(name, text, ours, peer) for name, rows in TABLES.items() for text, ours, peer in rows]


@pytest.mark.parametrize(("name", "text", "ours", "peer"), CASES)
def test_parse_table(name: str, text: str, ours: str | None, peer: str | None) -> None:
    parsed = get_judge_format(name).parse(text, "relative")
    assert parsed.verdict == ours
    if ours is None:
        assert parsed.reason is not None and parsed.reason.startswith(f"{name}: ")
        assert parsed.verdict_start is None
    else:
        assert parsed.reason is None
        assert parsed.verdict_start is not None and text[parsed.verdict_start].upper() == ours


@pytest.mark.parametrize(("name", "text", "ours", "peer"), CASES)
def test_rewardbench_parser_reads_the_table_as_stated(rewardbench_generative, name, text, ours, peer) -> None:
    """The peer column is what rewardbench's own parser says; where it differs from ours the row is a
    deliberate difference (docs/formats.md lists the kinds)."""
    assert rewardbench_generative.process_judgement(text, MODIFIERS[name]) == peer


def test_agreement_where_the_peer_is_right() -> None:
    """Most rows are agreements; every format has some, and every format has deliberate differences."""
    for name, rows in TABLES.items():
        agree = [r for r in rows if r[1] == r[2] or (r[1] is None and r[2] in ("error", None))]
        assert len(agree) >= 4, name
        assert len(agree) < len(rows), name


@pytest.mark.parametrize(
    ("name", "text", "feedback"),
    [
        ("selene", "**Reasoning:** B is right.\n\n**Result:** B", "B is right."),
        ("selene", "B is right.\n**Result:** B", "B is right."),
        ("mt-bench-pairwise", "B is right. Verdict: [[B]]", "B is right. Verdict:"),
        ("rise-judge", "回答B正确。'[[B]]'", "回答B正确。"),
        ("offsetbias", "Output (b)", ""),
    ],
)
def test_feedback_is_the_text_before_the_verdict(name: str, text: str, feedback: str) -> None:
    assert get_judge_format(name).parse(text, "relative").feedback == feedback


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("selene", "**Reasoning:** cut", "no **Result:** A|B"),
        ("selene", "**Result:** C", "expected A or B alone, got 'C'"),
        ("mt-bench-pairwise", "[[C]]", "the last verdict is '[[C]]'"),
        ("mt-bench-pairwise", "It is not [[A]]", "negated or hedged ('not'"),
        ("mt-bench-pairwise", "[[A]] because", "text follows the last verdict"),
        ("offsetbias", "Output (a) is better", "expected only 'Output (a)' or 'Output (b)'"),
        ("rise-judge", "没有结论", "no [[A]] or [[B]] verdict"),
    ],
)
def test_failure_reason_names_format_and_what_was_missing(name: str, text: str, needle: str) -> None:
    reason = get_judge_format(name).parse(text, "relative").reason
    assert reason is not None and reason.startswith(name + ": ") and needle in reason


@pytest.mark.parametrize(
    ("name", "prefix", "labels"),
    [
        ("selene", "**Result:**", ("A", "B")),
        ("mt-bench-pairwise", "[[", ("A", "B")),
        ("rise-judge", "[[", ("A", "B")),
        ("offsetbias", "Output (", ("a", "b")),
    ],
)
def test_forced_verdict_is_one_label_after_the_prefix(name: str, prefix: str, labels: tuple[str, ...]) -> None:
    """Appending the force prefix and any verdict label (plus the format's closing) parses to that verdict."""
    fmt = get_judge_format(name)
    assert fmt.force_prefix == prefix and fmt.verdict_labels("relative") == labels
    closing = {"[[": "]]", "Output (": ")"}.get(prefix, "")
    for label, verdict in zip(labels, ("A", "B"), strict=True):
        text = "A and B compared." + ("\n\n" if name != "offsetbias" else "") + prefix + label + closing
        if name == "offsetbias":
            text = prefix + label + closing
        parsed = fmt.parse(text, "relative")
        assert parsed.verdict == verdict and text[parsed.verdict_start] == label
