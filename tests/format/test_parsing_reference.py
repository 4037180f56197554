"""prom_reward.format.parsing against the reference library's parser table, real verbalizations, and
negated/hedged marker-free verdicts (issue 14)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prom_reward import PrometheusJudge
from prom_reward.format.parsing import parse_absolute, parse_output, parse_relative

# prometheus-eval's own parser table (libs/prometheus-eval/tests/test_parser.py, 34 cases): inputs and
# expectations as published. All 34 expectations are sound and all pass; none is rejected. (Before
# issue 14 we failed the three "score of"/"Result:" labels after the marker.)
REFERENCE_TABLE = [
    ("Excellent. [RESULT] 5 out of 5", "absolute", 5),
    ("Poor performance. [RESULT] score of 1", "absolute", 1),
    ("Good job. [Result] 3", "absolute", 3),
    ("Needs improvement. [Result] Score: 2", "absolute", 2),
    ("Well done. [Result] Result: 4", "absolute", 4),
    ("Average. [Result] 4/5", "absolute", 4),
    ("Excellent. [Result] 5 out of 5", "absolute", 5),
    ("Poor performance. [Result] score of 1", "absolute", 1),
    ("Good job. (Score 5)", "absolute", 5),
    ("Good job. [Score 4]", "absolute", 4),
    ("Good job. score: 3", "absolute", 3),
    ("Good job. Score: 3", "absolute", 3),
    ("Good job. score of 1", "absolute", 1),
    ("Good job. [RESULT] (5)", "absolute", 5),
    ("The score is definitely not 3.", "absolute", None),
    ("I rate this a perfect 10!", "absolute", None),
    ("Score: 2.5", "absolute", None),
    ("Result: A", "absolute", None),
    ("Response A is better. [RESULT] A", "relative", "A"),
    ("Prefer Response B. [RESULT] B", "relative", "B"),
    ("Feedback: Both responses are similar... [Response B]", "relative", "B"),
    ("Feedback: Both responses are clear... [Result] Response B", "relative", "B"),
    ("Feedback: Both responses are clear... Response B Response A", "relative", None),
    ("Feedback: Both responses are clear... [RESULT: B]", "relative", "B"),
    ("Feedback: Both responses are clear... [Result: B]", "relative", "B"),
    ("Feedback: Both responses are clear...Response A. [RESULT] B", "relative", "B"),
    ("After careful consideration, I select Response B.", "relative", None),
    ("Both responses have their merits.", "relative", None),
    ("Response C is clearly superior.", "relative", None),
    ("The better response is obviously B... or is it A? It's hard to decide.", "relative", None),
    ("", "absolute", None),
    ("", "relative", None),
    (None, "absolute", None),
    (None, "relative", None),
]


def test_reference_table_is_complete() -> None:
    assert len(REFERENCE_TABLE) == 34


@pytest.mark.parametrize(("text", "mode", "expected"), REFERENCE_TABLE)
def test_reference_library_table(text: str, mode: str, expected: object) -> None:
    assert parse_output(text, mode).verdict == expected  # type: ignore[arg-type]


# Real verbalizations after the marker that were rejected before issue 14.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Adequate. [RESULT] score of 3", 3),
        ("Adequate. [RESULT] a score of 3", 3),
        ("Good. [Result] Result: 4", 4),
        ("Good. [RESULT] 4\nScore: 4", 4),
        ("Good. [RESULT] 4\n(Score: 4/5)", 4),
        ("Good. [RESULT] 4\nScore: 3", None),  # two different verdicts: ambiguous
        ("Good. [RESULT] 4\nScore: 4.5", None),
        ("Good. [RESULT] not 4", None),
        ("Good. [RESULT] maybe 4", None),
        ("Good. [RESULT] 4, or maybe 3", None),
    ],
)
def test_marker_verbalizations(text: str, expected: int | None) -> None:
    assert parse_absolute(text) == expected
    if expected is not None:
        assert text[parse_output(text, "absolute").verdict_start] == str(expected)


# Marker-free endings whose final sentence negates, hedges, compares or holds another number.
@pytest.mark.parametrize(
    "text",
    [
        "Weak reasoning, so it does not deserve a score of 5.",
        "Lacks depth, so it does not deserve a score of 5.",
        "I wouldn't give it 5/5",
        "It is not 4 out of 5",
        "Good. Maybe 4/5",
        "Good. It could be a score of 4",
        "Somewhere between a score of 3 and a score of 4",
        "Score: 3 or Score: 4",
        "It misses 2 of the 3 steps, score: 4",
        "Too vague for a score of 5",
        "It falls short of a score of 5",
        "Lower than a score of 4",
        "Initially a score of 3",
        "B is better than [Response A]",
        "The winner is not (Response B)",
        "Perhaps (Response A)",
    ],
)
def test_negated_or_hedged_marker_free_verdicts_are_failures(text: str) -> None:
    mode = "relative" if "Response" in text else "absolute"
    assert parse_output(text, mode).verdict is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It has no errors. Score: 5", 5),  # the negation is in an earlier sentence
        ("Not perfect; score: 4", 4),
        ("Clear and correct, it deserves a score of 4.", 4),
        ("Clear and correct (4/5).", 4),
    ],
)
def test_doubt_in_an_earlier_sentence_does_not_matter(text: str, expected: int) -> None:
    assert parse_absolute(text) == expected


def test_judge_resamples_a_negated_verdict() -> None:
    negated = "Lacks depth, so it does not deserve a score of 5."
    alone = PrometheusJudge(backend="scripted", outputs=[negated], max_retries=0)
    assert alone.grade(["q"], ["a"], "helpfulness")[0].score is None
    retried = PrometheusJudge(backend="scripted", outputs=[negated, "Lacks depth. [RESULT] 2"], max_retries=1)
    assert retried.grade(["q"], ["a"], "helpfulness")[0].score == 2.0


# ---- property: a verdict negated or hedged in the final sentence is never returned ---------------

DOUBTS = [
    "does not deserve",
    "doesn't deserve",
    "is not",
    "isn't",
    "would not give it",
    "wouldn't earn",
    "never reaches",
    "cannot get",
    "maybe",
    "perhaps",
    "possibly",
    "it could be",
    "it might get",
    "almost",
    "nearly",
    "if it were fixed,",
    "less than",
    "more than",
    "rather than",
    "instead of",
    "not quite",
    "falls short of",
    "lacks what earns",
    "is too weak for",
    "somewhere between 2 and",
    "either 3 or",
]
FORMS = ["a score of {k}", "{k}/5", "{k} out of 5", "Score: {k}", "[Score {k}]", "(Score: {k})"]
FILLER = st.text(alphabet=st.characters(blacklist_characters="\n.!?;", blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=400)
@given(
    prefix=st.text(max_size=40),
    before=FILLER,
    doubt=st.sampled_from(DOUBTS),
    after=FILLER,
    form=st.sampled_from(FORMS),
    k=st.sampled_from("12345"),
    tail=st.sampled_from(["", ".", "!", " </s>", "\n"]),
)
def test_negated_or_hedged_final_sentence_never_yields_a_verdict(
    prefix: str, before: str, doubt: str, after: str, form: str, k: str, tail: str
) -> None:
    if "[result" in (prefix + before + after).lower():
        return  # a marker decides instead (its payload is checked by the table above)
    text = f"{prefix}\n{before} {doubt} {after} {form.format(k=k)}{tail}"
    assert parse_absolute(text) is None
    # the same sentence without the doubt is read (so the property is not vacuous), unless the
    # random filler itself holds a doubt word or a number
    plain = f"{prefix}\nIt earns {form.format(k=k)}{tail}"
    assert parse_absolute(plain) == int(k)


@settings(max_examples=200)
@given(
    prefix=st.text(max_size=40),
    doubt=st.sampled_from(DOUBTS[:12]),
    letter=st.sampled_from("AB"),
    brackets=st.sampled_from(["[]", "()"]),
)
def test_negated_relative_label_never_yields_a_verdict(prefix: str, doubt: str, letter: str, brackets: str) -> None:
    if "[result" in prefix.lower():
        return
    text = f"{prefix}\nThe winner {doubt} {brackets[0]}Response {letter}{brackets[1]}"
    assert parse_relative(text) is None
    assert parse_relative(f"{prefix}\nThe winner is {brackets[0]}Response {letter}{brackets[1]}") == letter
