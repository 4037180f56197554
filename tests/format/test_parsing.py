"""Tests for prom_reward.format.parsing: tables of real-world judge endings, then properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prom_reward.format import parsing
from prom_reward.format.parsing import ParsedOutput, parse_absolute, parse_output, parse_relative

ABSOLUTE_CASES = [
    # lenient: marker forms
    ("Clear and correct. [RESULT] 4", 4),
    ("Clear and correct. [RESULT] (5)", 5),
    ("Clear and correct. [RESULT]: 3", 3),
    ("Some gaps. [Result] Score: 2", 2),
    ("Clear and correct. [RESULT] 4/5", 4),
    ("Clear and correct. [RESULT] 4 / 5", 4),
    ("Flawless. [RESULT] 5 out of 5", 5),
    ("Off topic. [result] 1", 1),
    ("Mostly right. [RESULT: 4]", 4),
    ("Adequate. [RESULT]3", 3),
    ("Adequate.\n[RESULT]\n3", 3),
    ('Mostly right. [RESULT] "4"', 4),
    ("Mostly right. [RESULT] **4**", 4),
    ("Adequate. [RESULT] [3]", 3),
    ("Flawless. [RESULT] Final Score: 5", 5),
    ("Adequate. [Result]: Score 3", 3),
    ("  [RESULT]  1  ", 1),
    ("Feedback: The answer names the\ncorrect prime.\n\nIt misses 2 details.\n[RESULT] 4", 4),
    # lenient: trailing junk
    ("Adequate. [RESULT] 3</s>", 3),
    ("Adequate. [RESULT] 3<|im_end|>", 3),
    ("Adequate. [RESULT] 3<|eot_id|>\n", 3),
    ("Weak. [RESULT] 2.", 2),
    ("Mostly right. [RESULT] 4 \n\n </s></s>", 4),
    ("Mostly right. [RESULT] 4!", 4),
    # the last marker decides
    ("Draft: [RESULT] 2\nOn reflection it is better. [RESULT] 4", 4),
    # lenient: marker-free endings
    ("Mostly right. 4/5", 4),
    ("Mostly right. Overall: 4/5.", 4),
    ("Mostly right (4/5).", 4),
    ("Flawless. 5 out of 5", 5),
    ("It deserves a score of 3.", 3),
    ("Off topic, score of 1", 1),
    ("Mostly right. [Score 4]", 4),
    ("Flawless. (Score 5)", 5),
    ("Mostly right.\nScore: 4", 4),
    ("Mostly right. Score: 4</s>", 4),
    ("Mostly right. Final score: 4", 4),
    # strict: not a verdict after the marker
    ("Between two levels. [RESULT] 2.5", None),
    ("Great. [RESULT] 10", None),
    ("Nothing. [RESULT] 0", None),
    ("Beyond perfect. [RESULT] 6", None),
    ("Clear. [RESULT] A", None),
    ("Clear. [RESULT] B", None),
    ("Clear. [RESULT] 4/10", None),
    ("Clear. [RESULT] 3 out of 10", None),
    ("Clear. [RESULT] 3-4", None),
    ("Clear. [RESULT] 4 or 5", None),
    ("Clear. [RESULT] 45", None),
    ("Clear. [RESULT] four", None),
    ("Clear. [RESULT] 4 because it is concise", None),
    ("Clear. [RESULT]", None),
    ("Clear. [RESULT] </s>", None),
    ("Good. [RESULT] 4\nHmm. [RESULT] 2.5", None),  # last marker invalid -> None
    ("Good. [RESULT] 4\nGood. [RESULT]", None),
    # strict: digits only inside the body, or the text is cut off
    ("It lists 4 steps.", None),
    ("The response gets a 3 in my view.", None),
    ("The response is accurate and", None),
    ("Score 3 descriptions say the answer must be complete. The answer is incomplete.", None),
    ("It scored 4/5 on the quiz, yet the explanation", None),
    ("[Score 4] fits weaker answers, but this one", None),
    ("The ratio is 2.4/5", None),
    ("The ratio is 14/5", None),
    ("", None),
]

RELATIVE_CASES = [
    ("A is vague. [RESULT] A", "A"),
    ("B is precise. [RESULT] B", "B"),
    ("B is precise. [RESULT: B]", "B"),
    ("B is precise. [RESULT] Response B", "B"),
    ("A is precise. [RESULT] Response: A", "A"),
    ("A is precise. [RESULT] (A)", "A"),
    ('A is precise. [RESULT] "A"', "A"),
    ("B is precise. [result] B</s>", "B"),
    ("B is precise. [RESULT] B.", "B"),
    ("A is precise. [RESULT]: A", "A"),
    ("B is precise. [RESULT] **B**", "B"),
    ("B is precise. [Result] [B]", "B"),
    ("B is precise. [RESULT] B<|eot_id|>\n", "B"),
    ("First look: [RESULT] A\nOn reflection B is better. [RESULT] B", "B"),
    ("Feedback: A is vague,\nB is precise.\n[Response B]", "B"),
    ("A is precise, so the winner is (Response A)", "A"),
    ("Neither. [RESULT] C", None),
    ("Close call. [RESULT] A or B", None),
    ("Close call. [RESULT] A/B", None),
    ("Close call. [RESULT] Both", None),
    ("Close call. [RESULT] tie", None),
    ("Close call. [RESULT] AB", None),
    ("Close call. [RESULT] Response C", None),
    ("Good. [RESULT] 4", None),
    ("Good. [RESULT] b", None),
    ("First: [RESULT] A\nThen: [RESULT] Tie", None),
    ("First: [RESULT] B\nThen: [RESULT]", None),
    ("Response B is better.", None),
    ("[Response B] is more detailed, while Response A", None),
    ("Both are fine. A", None),
    ("", None),
]

ACCEPTED = [(t, v, "absolute") for t, v in ABSOLUTE_CASES if v is not None] + [
    (t, v, "relative") for t, v in RELATIVE_CASES if v is not None
]


def test_tables_are_large_enough() -> None:
    assert len(ABSOLUTE_CASES) >= 40 and len(RELATIVE_CASES) >= 20


@pytest.mark.parametrize(("text", "expected"), ABSOLUTE_CASES)
def test_absolute_table(text: str, expected: int | None) -> None:
    assert parse_absolute(text) == expected
    assert parse_output(text, "absolute").verdict == expected


@pytest.mark.parametrize(("text", "expected"), RELATIVE_CASES)
def test_relative_table(text: str, expected: str | None) -> None:
    assert parse_relative(text) == expected
    assert parse_output(text, "relative").verdict == expected


@pytest.mark.parametrize(("text", "verdict", "mode"), ACCEPTED)
def test_verdict_start_points_at_the_verdict(text: str, verdict: int | str, mode: str) -> None:
    parsed = parse_output(text, mode)  # type: ignore[arg-type]
    assert parsed.verdict_start is not None
    assert text[parsed.verdict_start] == str(verdict)


# A marker-free verdict written as prose ("a score of 3", "4/5") is part of a sentence and stays in
# the feedback; markers and labels ("[RESULT] 4", "Score: 4", "[Response B]") never do.
PROSE_VERDICT = re.compile(r"(?i)(/\s*5|out of 5|score of [1-5])\W*$")


def _is_prose_verdict(text: str) -> bool:
    return "[result" not in text.lower() and PROSE_VERDICT.search(text) is not None


@pytest.mark.parametrize(("text", "verdict", "mode"), ACCEPTED)
def test_feedback_excludes_verdict_tail_and_label(text: str, verdict: int | str, mode: str) -> None:
    parsed = parse_output(text, mode)  # type: ignore[arg-type]
    assert parsed.verdict_start is not None
    if _is_prose_verdict(text):
        assert parsed.feedback == text.strip()
    else:
        assert parsed.feedback in text[: parsed.verdict_start]
    assert parsed.feedback == parsed.feedback.strip()
    assert not parsed.feedback.lower().startswith("feedback")
    if text.lower().count("[result") == 1:
        assert "[result" not in parsed.feedback.lower()


@pytest.mark.parametrize(
    ("text", "mode", "feedback"),
    [
        ("Feedback: Clear steps.\n[RESULT] 4</s>", "absolute", "Clear steps."),
        ("###Feedback: Terse. [RESULT] 3", "absolute", "Terse."),
        ("Draft [RESULT] 2\nRevised. [RESULT] 4", "absolute", "Draft [RESULT] 2\nRevised."),
        ("Good, but [RESULT] 2.5", "absolute", "Good, but"),
        ("Mostly right. Score: 4", "absolute", "Mostly right."),
        ("Mostly right. [Score 4]", "absolute", "Mostly right."),
        ("It deserves a score of 3.", "absolute", "It deserves a score of 3."),
        ("Mostly right. 4/5.</s>", "absolute", "Mostly right. 4/5."),
        ("Feedback: no verdict here.</s>\n", "absolute", "no verdict here."),
        ("A is vague. [Response B]", "relative", "A is vague."),
        ("", "relative", ""),
    ],
)
def test_feedback_examples(text: str, mode: str, feedback: str) -> None:
    assert parse_output(text, mode).feedback == feedback  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 4, 4.0, b"[RESULT] 4", ["[RESULT] 4"], object()])
def test_non_strings_have_no_verdict(value: object) -> None:
    assert parse_absolute(value) is None
    assert parse_relative(value) is None
    assert parse_output(value, "absolute") == ParsedOutput("", None, None)


def test_unknown_mode_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        parse_output("[RESULT] 4", "pairwise")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "[RESULT]" + " " * 50_000 + "x",
        "[RESULT] " + "(" * 50_000 + "4",
        "Score" + " " * 50_000 + ": 4x",
        "</s>" * 20_000,
        "[result " * 20_000,
        "a 4" + " /" * 30_000,
        "(" * 20_000 + "Score: " * 20_000,
    ],
)
def test_adversarial_inputs_are_fast(text: str) -> None:
    start = time.perf_counter()
    for mode in ("absolute", "relative"):
        parse_output(text, mode)  # type: ignore[arg-type]
    assert time.perf_counter() - start < 2.0


# ---- properties -------------------------------------------------------------------------------

PIECES = [
    "[RESULT]",
    "[result:",
    "[Result] ",
    "]",
    "[",
    "(",
    ")",
    '"',
    "*",
    ":",
    "/5",
    "/",
    " out of 5",
    "Score:",
    "Score ",
    "score of ",
    "[Score ",
    "Response ",
    "[Response ",
    "Feedback:",
    "</s>",
    "<|im_end|>",
    ".",
    "\n",
    " ",
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "10",
    "2.5",
    "A",
    "B",
    "C",
    "a",
    "b",
    "tie",
]
SPLICED = st.lists(st.one_of(st.text(max_size=8), st.sampled_from(PIECES)), max_size=25).map("".join)
ANY_TEXT = st.one_of(st.text(), SPLICED)
MODES = st.sampled_from(["absolute", "relative"])


def _check_invariants(text: str, mode: str) -> None:
    parsed = parse_output(text, mode)  # type: ignore[arg-type]
    domain = {1, 2, 3, 4, 5} if mode == "absolute" else {"A", "B"}
    assert parsed.verdict is None or parsed.verdict in domain
    assert (parsed.verdict is None) == (parsed.verdict_start is None)
    assert parsed.feedback in text
    if parsed.verdict_start is not None:
        assert text[parsed.verdict_start] == str(parsed.verdict)
    marker = parsing._last_marker(text)
    if marker is not None:  # the deciding marker and what follows it never reach the feedback
        assert parsed.feedback in text[: marker.start()]
    assert parsed.feedback == parsed.feedback.strip()


@settings(max_examples=400)
@given(text=ANY_TEXT, mode=MODES)
def test_random_text_never_raises_and_stays_in_domain(text: str, mode: str) -> None:
    _check_invariants(text, mode)
    assert parse_absolute(text) == parse_output(text, "absolute").verdict
    assert parse_relative(text) == parse_output(text, "relative").verdict


@settings(max_examples=300)
@given(feedback=ANY_TEXT, k=st.sampled_from(parsing.ABSOLUTE_VERDICTS + parsing.RELATIVE_VERDICTS))
def test_appending_a_verdict_round_trips(feedback: str, k: str) -> None:
    # Whatever came before, an appended marker is the last one, so it decides.
    mode = "absolute" if k.isdigit() else "relative"
    text = feedback + " [RESULT] " + k
    parsed = parse_output(text, mode)  # type: ignore[arg-type]
    assert parsed.verdict == (int(k) if k.isdigit() else k)
    assert parsed.verdict_start == len(text) - 1
    # Feedback free of markers (in any case) and labels comes back whole, stripped.
    if parsing._MARKER.search(feedback) is None and "feedback" not in feedback.lower():
        assert parsed.feedback == feedback.strip()


@settings(max_examples=300)
@given(
    prefix=ANY_TEXT,
    case=st.sampled_from(ACCEPTED),
    junk=st.lists(st.sampled_from([" ", "\n", ".", "!", "</s>", "<|im_end|>", "<|eot_id|>"]), max_size=5),
)
def test_valid_endings_survive_any_prefix_and_trailing_junk(prefix: str, case: tuple, junk: list[str]) -> None:
    text, verdict, mode = case
    if "[result" not in text.lower():
        prefix += "\n"  # marker-free forms are read from the last line only
        if parsing._MARKER.search(prefix) is not None:
            return  # an earlier marker would decide instead
    full = prefix + text + "".join(junk)
    parsed = parse_output(full, mode)
    assert parsed.verdict == verdict
    assert full[parsed.verdict_start] == str(verdict)
