"""``prometheus2``'s pairwise parser against rewardbench 0.1.4's own (``process_judgement(..., "prometheus")``).

rewardbench reads a Prometheus verdict as the last character of the output when ``[RESULT]`` appears anywhere. Ours
agrees wherever that reading is right; the cases where it differs on purpose are listed (and documented in
docs/formats.md, "prometheus2 and rewardbench's Prometheus parser"). A case that starts agreeing, or a listed
difference that goes away, fails the test: the list stays the true one.
"""

from __future__ import annotations

import types

import pytest

from prom_reward.format.judge_format import get_judge_format

PROMETHEUS2 = get_judge_format("prometheus2")

AGREE = [
    ("Feedback: A is better. [RESULT] A", "A"),
    ("Feedback: B covers more. [RESULT] B", "B"),
    ("Feedback: [RESULT] A [RESULT] B", "B"),  # the last [RESULT] decides
    ("[RESULT] A\n\n[RESULT] B", "B"),
    ("Feedback: x [RESULT] Response B", "B"),
    ("Feedback: x [RESULT]B", "B"),
    ("A is better. Verdict: B", None),  # no [RESULT]: both fail
    ("The better one is A", None),
    ("Feedback: x [RESULT] C", None),
    ("Feedback: x [RESULT] 5", None),
    ("Feedback: Response B would win if it were shorter. [RESULT]", None),
    ("Feedback: x [RESULT] a", None),  # a lower-case label is not Prometheus 2's verdict
]

# (output, ours, rewardbench's, why ours differs)
DIFFER = [
    ("Feedback: A. [RESULT] A.", "A", "error", "a full stop after the verdict: the last character is '.'"),
    ("Feedback: B. [RESULT] B\n", "B", "error", "a trailing newline"),
    ("Feedback: B. [RESULT] B</s>", "B", "error", "an end-of-sequence token left in the text"),
    ("Feedback: fine [RESULT] (A)", "A", "error", "the verdict in brackets, as the prompt's own '(A or B)' shows it"),
    ("Feedback: x [RESULT] **A**", "A", "error", "the verdict in markdown bold"),
    ("Feedback: ok [RESULT] A ... but wait, B", None, "B", "text after the verdict that ends in the other letter"),
    ("Feedback: torn [RESULT] A or B", None, "B", "both letters after [RESULT]: no verdict, not the last one"),
]


def _peer(rewardbench_generative: types.ModuleType, text: str) -> str | None:
    got = rewardbench_generative.process_judgement(text, "prometheus")
    return None if got == "error" else got


@pytest.mark.parametrize(("text", "verdict"), AGREE)
def test_where_rewardbench_reads_prometheus_right_we_agree(rewardbench_generative, text, verdict):
    assert PROMETHEUS2.parse(text, "relative").verdict == verdict
    assert _peer(rewardbench_generative, text) == verdict


@pytest.mark.parametrize(("text", "ours", "theirs", "why"), DIFFER, ids=[d[3] for d in DIFFER])
def test_the_documented_differences_hold(rewardbench_generative, text, ours, theirs, why):
    parsed = PROMETHEUS2.parse(text, "relative")
    assert parsed.verdict == ours
    assert rewardbench_generative.process_judgement(text, "prometheus") == theirs
    if ours is None:  # a failure names the format and what was missing
        assert parsed.reason and parsed.reason.startswith("prometheus2: ")
