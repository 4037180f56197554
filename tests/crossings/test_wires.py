"""The format-aware stand-in judge (``tests.judge_answers``): every registered format has a wire written by hand, the
stand-in finds each format's prompt (as the format renders it) and each format's parser reads the stand-in's answer
as the grade or verdict meant, on the format's scale."""

from __future__ import annotations

import pytest

from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.format.rubrics import Rubric
from tests.crossings.formats import FORMATS, YAML, judge_format, rubric_for
from tests.judge_answers import WIRES, answer, on_scale, read_prompt

ABSOLUTE = [n for n in FORMATS if n == YAML or "absolute" in JUDGE_FORMATS.get(n).tasks]
RELATIVE = [n for n in FORMATS if n == YAML or "relative" in JUDGE_FORMATS.get(n).tasks]


def test_every_registered_format_has_a_hand_written_wire():
    missing = sorted(set(JUDGE_FORMATS) - set(WIRES))
    assert not missing, f"add a wire for {missing} to tests/judge_answers.py WIRES (the judge's own output)"


@pytest.mark.parametrize("name", ABSOLUTE)
@pytest.mark.parametrize("grade", [1, 3, 5])
def test_the_stand_in_reads_each_formats_absolute_prompt_and_its_grade_parses_on_the_scale(tmp_path, name, grade):
    fmt = judge_format(name, tmp_path)
    rubric = Rubric(**rubric_for(fmt))
    prompt = fmt.absolute_prompt("What is 2+2?", "good four", rubric, None)
    read = read_prompt(prompt.system, prompt.user)
    assert read is not None and read.task == "absolute" and read.texts == ("good four",)
    assert read.scale == fmt.scale and WIRES[read.name] is WIRES[fmt.name if name != YAML else "tiny"]
    assert fmt.parse(answer(read, (grade,)), "absolute").verdict == on_scale(grade, fmt.scale)


@pytest.mark.parametrize("name", RELATIVE)
@pytest.mark.parametrize(("grades", "winner"), [((5, 1), "A"), ((1, 5), "B"), ((3, 3), "A")])
def test_the_stand_in_reads_each_formats_pairwise_prompt_and_its_verdict_parses(tmp_path, name, grades, winner):
    fmt = judge_format(name, tmp_path)
    prompt = fmt.relative_prompt("What is 2+2?", "one four", "two four", Rubric(**rubric_for(fmt)), None)
    read = read_prompt(prompt.system, prompt.user)
    assert read is not None and read.task == "relative" and read.texts == ("one four", "two four"), name
    assert fmt.parse(answer(read, grades), "relative").verdict == winner


@pytest.mark.parametrize(
    ("scale", "mapped"), [((1, 2, 3, 4, 5), [1, 2, 3, 4, 5]), ((1, 2, 3), [1, 2, 2, 3, 3]), ((0, 1), [0, 0, 1, 1, 1])]
)
def test_grades_map_onto_the_formats_scale(scale, mapped):
    assert [on_scale(g, scale) for g in range(1, 6)] == mapped
