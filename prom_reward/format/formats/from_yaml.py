"""A judge format defined by a YAML file (``--format my_judge.yaml``), checked at load, named by its file's name
plus a digest of its content (``my-judge@1a2b3c4d5e6f``) so an edited file never shares stored judgments."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from prom_reward.errors import ConfigError
from prom_reward.format.eos import content_end
from prom_reward.format.formats.yaml_schema import FormatSpec, TaskSpec, read_spec
from prom_reward.format.judge_format import FORMAT_FILES, JudgeFormat, Prompt, Task, check_task
from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import fill, need_str, template_fields


class YamlFormat(JudgeFormat):
    """The judge format a checked YAML file (``FormatSpec``) defines."""

    def __init__(self, spec: FormatSpec, path: str) -> None:
        self.spec, self.path = spec, path
        self.name = f"{spec.name}@{spec.digest[:12]}"
        self.tasks = frozenset(spec.tasks)  # type: ignore[arg-type]
        self.scale = spec.scale if "absolute" in spec.tasks else ()
        self.force_prefix = spec.force_prefix
        self.markers = spec.markers
        self._fields = {  # the fields each task's templates use
            task: set().union(*(template_fields(x) for x in (t.system, t.user, t.user_no_reference or "")))
            for task, t in spec.tasks.items()
        }
        self._rubric_used = "rubric" in self._fields.get("absolute", ())

    def _task(self, task: Task) -> TaskSpec:
        check_task(self, task)
        return self.spec.tasks[task]

    def _render(self, t: TaskSpec, values: dict[str, str], rubric: Rubric, reference: str | None) -> Prompt:
        values["criteria"] = rubric.criteria
        values["reference"] = (
            need_str(reference, "reference_answer") if reference is not None else t.reference_missing or ""
        )
        user = t.user if reference is not None or t.user_no_reference is None else t.user_no_reference
        return Prompt(fill(t.system, values), fill(user, values))

    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        t = self._task("absolute")
        problem = self.rubric_problem(rubric, "absolute")
        if problem is not None:
            raise ConfigError(problem)
        values = {"instruction": need_str(instruction, "instruction"), "response": need_str(response, "response")}
        if self._rubric_used:
            items = [
                fill(self.spec.rubric_item, {"score": str(s), "description": d})
                for s, d in zip(self.scale, rubric.descriptions, strict=True)
            ]
            values["rubric"] = self.spec.rubric_separator.join(items)
        return self._render(t, values, rubric, reference)

    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        t = self._task("relative")
        values = {
            "instruction": need_str(instruction, "instruction"),
            "response_a": need_str(response_a, "response_a"),
            "response_b": need_str(response_b, "response_b"),
        }
        return self._render(t, values, rubric, reference)

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        if task != "absolute" or not self._rubric_used or len(rubric.descriptions) == len(self.scale):
            return None
        n, scores = len(rubric.descriptions), ", ".join(map(str, self.scale))
        return (
            f"rubric {rubric.criteria[:60]!r} has {n or 'no'} score descriptions; {self.spec.name} ({self.path}) "
            f"grades need {len(self.scale)} (scores {scores}), got {n}; fix: give one description per score"
        )

    def uses_rubric(self, task: Task) -> bool:
        self._task(task)
        return bool({"criteria", "rubric"} & self._fields[task])

    def verdict_labels(self, task: Task) -> tuple[str, ...]:
        return self._task(task).labels

    def parse(self, text: str, task: Task) -> ParsedOutput:
        rule = self._task(task).verdict
        if not isinstance(text, str):
            return self._fail("", f"the output is not text (got {type(text).__name__})")
        end = content_end(text)
        found = list(rule.pattern.finditer(text, 0, end))
        if not found:
            return self._fail(text[:end].strip(), f"no verdict: nothing matches {rule.pattern.pattern!r}")
        if rule.match == "only" and len(found) > 1:
            return self._fail(text[:end].strip(), f"{len(found)} verdicts (one only)")
        m = found[0] if rule.match == "first" else found[-1]
        feedback = m.group("feedback") if "feedback" in rule.pattern.groupindex else None
        feedback = (feedback if feedback is not None else text[: m.start()]).strip()
        if rule.at_end and m.end() != end:
            return self._fail(
                feedback,
                f"the {rule.match} verdict does not end the output (after it: {text[m.end() : end].strip()[:40]!r})",
            )
        raw = m.group("verdict")
        value = rule.mapping.get(raw, raw) if raw is not None else None
        verdicts = {str(s): s for s in self.scale} if task == "absolute" else {"A": "A", "B": "B"}
        verdict = verdicts.get(str(value)) if value is not None else None
        if verdict is None:
            on = f"its scale ({', '.join(map(str, self.scale))})" if task == "absolute" else "A or B"
            return self._fail(feedback, f"verdict {raw!r} is not on {on}")
        return ParsedOutput(feedback, verdict, m.start("verdict"))

    def _fail(self, feedback: str, why: str) -> ParsedOutput:
        return ParsedOutput(feedback, None, None, f"{self.spec.name}: {why}")


@lru_cache(maxsize=32)
def _cached(path: str, content: bytes) -> YamlFormat:
    return YamlFormat(read_spec(path, content), path)


def load_yaml_format(path: str) -> YamlFormat:
    """The judge format the YAML file ``path`` defines, checked once per content (ConfigError naming the file,
    the key and the fix)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"judge format file {path!r} does not exist; fix: give the path of a YAML judge format file "
            "(docs/formats.md) or a registered format's name"
        )
    try:
        content = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"judge format file {path!r} cannot be read ({e.strerror or e}); fix: check it") from e
    return _cached(str(p), content)


FORMAT_FILES.register(".yaml", load_yaml_format)
FORMAT_FILES.register(".yml", load_yaml_format)
