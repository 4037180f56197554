"""The RM-R1 formats (prom_reward.format.formats.rm_r1: rm-r1, rm-r1-reasoning): prompts against the
reference rendering, and strict ``<answer>[[A]]</answer>`` parsing against a table where each row also
states what RM-R1's own scorer (rewardbench's default ``process_judgement``) returns.

RM-R1's evaluation code (RM-R1-UIUC/RM-R1, ``eval/reward-bench/rewardbench/generative.py`` at commit
6833863d6aaf7ed987dad2420244983fe470bd2f) cannot be installed here, so the prompts are checked against
SHA-256 digests of its ``format_judge_answers(..., model_modifier="RM-R1-Instruct" | "RM-R1-Reasoning")``
output for the item table, taken from that file; its scorer is rewardbench 0.1.4's default branch,
which is installed and runs here."""

from __future__ import annotations

import hashlib

import pytest

import prom_reward.format.formats  # noqa: F401  (registers the formats)
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import get_judge_format
from tests.format.pairwise_items import ITEMS, PAIRWISE_RUBRIC, Item

REFERENCE_SYSTEM = "e0bf09a87f19837abf172278c348e8fc6ed36034f4f39b98191910533c3df3ed"
# item id -> (RM-R1-Instruct user message, RM-R1-Reasoning user message), SHA-256 of the UTF-8 text
REFERENCE_USER = {
    "plain": (
        "984a8a89c41c4b1d30aee445ab3d3b32347200a97a1366fb7e124365ad31a8b3",
        "81cdce4bfdc044abb47ad68141614a57106988d3a9dffe050aea22f29234046e",
    ),
    "unicode": (
        "d446929762a62a36e959ba07734d5213b4b13351b687d66138d2c9f6cce5a785",
        "16449d1b38527e2d4e51fab6e71d73cdcf9b21252c5eb9a349907d5614305a62",
    ),
    "empty-reference": (
        "76fe311a04ab4c95f5ce312e330105aa161ea8ff4a774d1910d36e15eed41afd",
        "9995496930c19e805535f7c7e4aa6eff7cce91d90d340f1d0d4b1d2332a9de39",
    ),
    "missing-reference": (
        "76fe311a04ab4c95f5ce312e330105aa161ea8ff4a774d1910d36e15eed41afd",
        "9995496930c19e805535f7c7e4aa6eff7cce91d90d340f1d0d4b1d2332a9de39",
    ),
    "empty-responses": (
        "d0d952f53000de9c9d1706eebf32ad2ac01cf3600406405af0496752401a1ab7",
        "880c0d25dd18baf3173cf16af5ab98e00ab92c21edce723e158c643a75b686cf",
    ),
    "multi-line": (
        "fbef566dc2bcdfb41f4ee8b98353f61ca521af3cb1ea50b37fdc194565e4d2b1",
        "0687b9a57cbb2d9d9884fda902f49ed13e0cb6528a2f87993f37d8c8eafc8b7d",
    ),
    "braces": (
        "ae0e91923c9d5723f2da4610787268a02f554cf8e86573d66d45f975a73896b0",
        "e3310c8bd70c14f00657ee1571f50389afdc368b5621c43c4887c0728b9338d2",
    ),
    "own-tags": (
        "58c2b33f2e9712164513e99836186e45abbeb55aab8eee1a7b61eb9fd36cc074",
        "365356129529e5b737883cfe8a140d5cb7b8d2b2f5448bc75129d95a58195a10",
    ),
}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_digest_table_covers_the_item_table() -> None:
    assert set(REFERENCE_USER) == {item.id for item in ITEMS}


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i.id)
@pytest.mark.parametrize(("name", "column", "system"), [("rm-r1", 0, REFERENCE_SYSTEM), ("rm-r1-reasoning", 1, None)])
def test_prompt_matches_the_reference_rendering(name: str, column: int, system: str | None, item: Item) -> None:
    prompt = get_judge_format(name).relative_prompt(
        item.instruction, item.response_a, item.response_b, item.rubric, item.reference
    )
    assert sha256(prompt.user) == REFERENCE_USER[item.id][column]
    assert (sha256(prompt.system) if system else prompt.system) == (system or "")


OUTPUT = (
    "<type>Chat</type>\n\n<rubric>\n1. Accuracy (60%)\n<justify>Facts matter.</justify>\n</rubric>\n\n"
    "<eval>\n<quote_A>2 + 2 = 5</quote_A> is wrong; <summary_B>B says 4</summary_B>.\n</eval>\n\n"
)
# (text, our verdict, RM-R1's scorer: rewardbench's default process_judgement)
TABLE = [
    (OUTPUT + "<answer>[[B]]</answer>", "B", "B"),
    (OUTPUT + "<answer>[[A]]</answer><|im_end|>\n", "A", "A"),
    ("<think>A seems right... no, B.</think>\n" + OUTPUT + "<answer>[[B]]</answer>", "B", "B"),
    (OUTPUT + "<answer> [[B]] </answer>", "B", "B"),
    ("<eval>The format asks <answer>[[A]]</answer>; B is right.</eval>\n<answer>[[B]]</answer>", "B", "A"),
    (OUTPUT + "<answer>[[A/B]]</answer>", None, "error"),
    (OUTPUT + "<answer>[[C]]</answer>", None, "error"),
    (OUTPUT + "<answer>[[tie]]</answer>", None, "error"),
    (OUTPUT + "<answer>[[A]]", None, "A"),  # unclosed tag
    (OUTPUT + "<answer>[[A]]</answer>\nActually, B.", None, "A"),
    (OUTPUT + "<answer>[[A]] [[B]]</answer>", None, "A"),  # two verdicts
    (OUTPUT + "<answer>not [[A]]</answer>", None, "A"),
    ("<think>I'd say <answer>[[A]]</answer>", None, "A"),  # the thinking never closed
    (OUTPUT + "[[B]]", None, "B"),  # no answer tag
    (OUTPUT, None, "error"),
    ("", None, "error"),
]


@pytest.mark.parametrize("name", ["rm-r1", "rm-r1-reasoning"])
@pytest.mark.parametrize(("text", "ours", "peer"), TABLE)
def test_parse_table(rewardbench_generative, name: str, text: str, ours: str | None, peer: str) -> None:
    parsed = get_judge_format(name).parse(text, "relative")
    assert parsed.verdict == ours
    if ours is None:
        assert parsed.reason is not None and parsed.reason.startswith(f"{name}: ")
    else:
        assert parsed.reason is None and text[parsed.verdict_start] == ours
    assert rewardbench_generative.process_judgement(text, "RM-R1-Instruct") == peer


def test_feedback_is_the_judgment_before_the_answer_after_thinking() -> None:
    parsed = get_judge_format("rm-r1").parse("<think>hmm</think>\n" + OUTPUT + "<answer>[[B]]</answer>", "relative")
    assert parsed.feedback == OUTPUT.strip()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (OUTPUT, "no <answer>[[A]]</answer> or <answer>[[B]]</answer> at the end"),
        (OUTPUT + "<answer>[[A]]", "the last <answer> tag is not closed"),
        (OUTPUT + "<answer>[[C]]</answer>", "the last <answer> holds '[[C]]'"),
        (OUTPUT + "<answer>[[A]]</answer> ok", "text follows the last </answer>"),
        ("<think>long", "the <think> block is not closed"),
    ],
)
def test_failure_reasons(text: str, needle: str) -> None:
    reason = get_judge_format("rm-r1").parse(text, "relative").reason
    assert reason is not None and needle in reason


@pytest.mark.parametrize("name", ["rm-r1", "rm-r1-reasoning"])
def test_forced_verdict_and_refused_grading(name: str) -> None:
    fmt = get_judge_format(name)
    assert fmt.force_prefix == "<answer>[[" and fmt.verdict_labels("relative") == ("A", "B")
    assert fmt.parse(OUTPUT + fmt.force_prefix + "B]]</answer>", "relative").verdict == "B"
    with pytest.raises(ConfigError, match="does not judge absolute"):
        fmt.absolute_prompt("q", "r", PAIRWISE_RUBRIC, None)
