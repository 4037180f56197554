"""``format.judge_format.verdict_text``: a verdict written as each registered format's judge writes it, read back
by the same format's parser (parametrized over ``JUDGE_FORMATS``: a new format is covered without editing this file)."""

from __future__ import annotations

import json

import pytest

from benchmarks.reference_replay import ReferenceReplayBackend
from prom_reward.backends.base import GenerationRequest
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JUDGE_FORMATS, get_judge_format, verdict_text
from prom_reward.format.rubrics import get_rubric

BODIES = {  # feedback before the verdict, as each format's judge writes it ("" for a verdict-only output)
    "flow-judge": "<feedback>Good.</feedback>\n",
    "flow-judge-3": "<feedback>Good.</feedback>\n",
    "flow-judge-binary": "<feedback>Good.</feedback>\n",
    "selene": "**Reasoning:** Good.\n\n",
    "offsetbias": "",
}
CASES = [
    (name, task, verdict)
    for name in JUDGE_FORMATS
    for task in sorted(JUDGE_FORMATS.get(name).tasks)
    for verdict in (JUDGE_FORMATS.get(name).scale if task == "absolute" else ("A", "B"))
]


@pytest.mark.parametrize(("name", "task", "verdict"), CASES)
def test_a_written_verdict_is_read_back_by_its_formats_parser(name, task, verdict):
    fmt = JUDGE_FORMATS.get(name)
    if fmt.force_prefix is None:
        with pytest.raises(ConfigError, match=f"judge format {name!r} writes its verdict without a fixed marker"):
            verdict_text(fmt, task, verdict)
        return
    text = verdict_text(fmt, task, verdict)
    assert text.startswith(fmt.force_prefix.lstrip())
    assert fmt.parse(BODIES.get(name, "Good. ") + text, task).verdict == verdict


@pytest.mark.parametrize(
    ("name", "task", "verdict", "says"),
    [
        ("flow-judge", "relative", "A", "does not judge relative"),
        ("selene", "absolute", 5, "does not judge absolute"),
        ("flow-judge-binary", "absolute", 2, "verdict 2 is not one of 0, 1"),
    ],
)
def test_a_verdict_the_format_cannot_give_is_refused(name, task, verdict, says):
    with pytest.raises(ConfigError, match=says):
        verdict_text(get_judge_format(name), task, verdict)


@pytest.mark.parametrize("name", ["prometheus2", "selene", "mt-bench-pairwise", "offsetbias", "rm-r1"])
def test_human_labels_replay_in_the_judges_format(name, tmp_path):
    path = tmp_path / "autoj_pairwise.jsonl"
    path.write_text(json.dumps({"prompt": "Q?", "response 1": "good", "response 2": "bad", "label": 0}) + "\n")
    fmt = get_judge_format(name)
    backend = ReferenceReplayBackend.from_autoj_pairwise(path, judge_format=name)
    for a, b, winner in (("good", "bad", "A"), ("bad", "good", "B")):
        user = fmt.relative_prompt("Q?", a, b, get_rubric("helpfulness"), None).user
        (result,) = backend.generate([GenerationRequest("", user)])
        assert fmt.parse(result.completions[0].text, "relative").verdict == winner


def test_replays_a_format_cannot_hold_are_refused_at_start(tmp_path):
    path = tmp_path / "vicuna_eval.json"
    path.write_text(json.dumps([{"instruction": "P", "gpt4_feedback": "['ok']", "gpt4_score": "[4]"}]))
    (result,) = ReferenceReplayBackend.from_vicuna_eval(path, "flow-judge").generate([GenerationRequest("", "P")])
    assert result.completions[0].text == "ok <score>4</score>"
    with pytest.raises(ConfigError, match="grades on 1..3; fix: replay it in a 1..5 format"):
        ReferenceReplayBackend.from_vicuna_eval(path, "flow-judge-3")
    with pytest.raises(ConfigError, match="does not judge relative"):
        ReferenceReplayBackend.from_autoj_pairwise(path, judge_format="flow-judge")
    with pytest.raises(ConfigError, match="'con-j' writes its verdict without a fixed marker"):
        ReferenceReplayBackend.from_autoj_pairwise(path, judge_format="con-j")
