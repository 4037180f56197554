"""Rendering the Prometheus judge prompts: instruction, response(s), rubric and optional reference filled into
the templates (only ``None`` is a missing reference; user text is inserted verbatim)."""

from __future__ import annotations

from functools import lru_cache

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.parsing import Task
from prom_reward.format.rubrics import RUBRICS, Rubric
from prom_reward.format.templates import BUILTIN, fill, need_str, validate_template


@lru_cache(maxsize=256)  # (a batch renders one rubric for every item)
def _rubric_text(rubric: Rubric | str, absolute: bool) -> str:
    if isinstance(rubric, str) and rubric in RUBRICS:
        rubric = RUBRICS.get(rubric)
    if isinstance(rubric, str) and rubric.startswith("["):
        if absolute:
            return rubric
        try:
            return Rubric.parse(rubric).format_criteria()
        except ConfigError:  # not a full score rubric: use as-is
            return rubric
    if not isinstance(rubric, Rubric):
        got = repr(rubric[:60]) if isinstance(rubric, str) else type(rubric).__name__
        raise InputError(
            f"rubric must be a Rubric, a built-in name ({', '.join(RUBRICS.names())}) or formatted "
            f"rubric text starting with '[', got {got}; use get_rubric() for dicts and files",
            field="rubric",
        )
    if absolute and not rubric.has_scores:
        raise InputError(
            f"rubric {rubric.criteria[:60]!r} has {len(rubric.descriptions) or 'no'} score descriptions; absolute "
            "grading needs five (score 1..5)",
            field="rubric",
        )
    return rubric.format() if absolute else rubric.format_criteria()


def _render(
    kind: Task, values: dict[str, str], rubric: Rubric | str, reference_answer: str | None, template: str | None
) -> str:
    if reference_answer is not None:
        values["reference_answer"] = need_str(reference_answer, "reference_answer")
    text_of = _rubric_text if isinstance(rubric, Rubric) else _rubric_text.__wrapped__  # (a name: looked up each time)
    values["rubric"] = text_of(rubric, kind == "absolute")
    if template is not None:
        validate_template(template, kind, reference_answer is not None)
    return fill(BUILTIN[(kind, reference_answer is not None)] if template is None else template, values)


def render_absolute(
    instruction: str,
    response: str,
    rubric: Rubric | str,
    reference_answer: str | None = None,
    *,
    template: str | None = None,
) -> str:
    """The filled absolute prompt (``ABSOLUTE_PROMPT``, ``*_WO_REF`` without a reference); ``rubric``: a five-score
    ``Rubric``, formatted rubric text or a built-in name; ``template``: a custom template (validated)."""
    values = {"instruction": need_str(instruction, "instruction"), "response": need_str(response, "response")}
    return _render("absolute", values, rubric, reference_answer, template)


def render_relative(
    instruction: str,
    response_a: str,
    response_b: str,
    rubric: Rubric | str,
    reference_answer: str | None = None,
    *,
    template: str | None = None,
) -> str:
    """The filled pairwise prompt (``RELATIVE_PROMPT``, ``*_WO_REF`` without a reference), with the rubric's
    ``[criteria]`` line only (other ``[``-text is used as-is)."""
    values = {
        "instruction": need_str(instruction, "instruction"),
        "response_A": need_str(response_a, "response_a"),
        "response_B": need_str(response_b, "response_b"),
    }
    return _render("relative", values, rubric, reference_answer, template)
