"""A judge format defined by a YAML file (``--format my_judge.yaml``), checked at load against the schema below
(every error names the file, the key and the fix; docs/formats.md documents it), named by its file's name plus a
digest of its content (``my-judge@1a2b3c4d5e6f``) so an edited file never shares stored judgments."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from prom_reward.declared import read_text
from prom_reward.errors import ConfigError
from prom_reward.format.eos import content_end
from prom_reward.format.judge_format import FORMAT_FILES, JudgeFormat, Prompt, Task, check_task
from prom_reward.format.parsing import ParsedOutput
from prom_reward.format.rubrics import Rubric
from prom_reward.format.templates import fill, need_str, template_fields, unicode_problem

FIELDS = {
    "absolute": ("instruction", "response", "reference", "criteria", "rubric"),
    "relative": ("instruction", "response_a", "response_b", "reference", "criteria"),
}
_NEEDED = {"absolute": ("response",), "relative": ("response_a", "response_b")}
_Schema = dict[str, tuple[type, Any]]
"""One level's keys: their type and default (``...``: required)."""
_TOP: _Schema = {
    "name": (str, ...),
    "scale": (list, []),
    "force_prefix": (str, None),
    "markers": (list, []),
    "rubric_item": (str, "Score {score}: {description}"),
    "rubric_separator": (str, "\n"),
    "tasks": (dict, ...),
}
_TASKS: _Schema = {"absolute": (dict, None), "relative": (dict, None)}
_TASK: _Schema = {
    "system": (str, ""),
    "user": (str, ...),
    "user_no_reference": (str, None),
    "reference_missing": (str, None),
    "verdict": (dict, ...),
    "verdict_tokens": (list, None),
}
_VERDICT: _Schema = {"pattern": (str, ...), "match": (str, "last"), "at_end": (bool, True), "map": (dict, {})}
_MATCHES = ("last", "first", "only")
_KINDS = {str: "a string", bool: "true or false", list: "a list", dict: "a mapping"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class VerdictRule:
    """How one task's verdict is read: ``pattern``'s group ``verdict`` (``feedback``: the feedback), from the
    ``match`` that decides (``last``, ``first``, ``only``), ending the output when ``at_end``; ``mapping``: captured
    text -> verdict where they differ."""

    pattern: re.Pattern[str]
    match: str
    at_end: bool
    mapping: dict[str, int | str]


@dataclass(frozen=True)
class TaskSpec:
    """One task's templates (``user_no_reference`` None: ``user``; ``reference_missing``: what ``{reference}``
    renders without one), verdict rule, and verdict tokens for expected scores."""

    system: str
    user: str
    user_no_reference: str | None
    reference_missing: str | None
    verdict: VerdictRule
    labels: tuple[str, ...]


@dataclass(frozen=True)
class _Reader:
    """Errors that name the file and the key."""

    path: Path

    def fail(self, key: str, what: str, fix: str) -> ConfigError:
        return ConfigError(f"judge format file {str(self.path)!r}, key {key!r}: {what}; fix: {fix}")

    def read(self, data: object, where: str, schema: _Schema, what: str = "key") -> dict[str, Any]:
        """``data``, a mapping of ``schema``'s keys only, as each key's value of its type (missing: its default)."""
        if not isinstance(data, dict):
            problem = f"expected a mapping, got {type(data).__name__}"
            raise self.fail(where.rstrip(".") or "(top)", problem, "write it as 'key: value' lines")
        unknown = [str(k) for k in data if k not in schema]
        if unknown:
            raise self.fail(f"{where}{unknown[0]}", f"unknown {what}", f"use one of {', '.join(schema)}")
        values = {}
        for key, (kind, default) in schema.items():
            if key not in data and default is ...:
                raise self.fail(f"{where}{key}", "missing", f"add {where}{key} ({_KINDS[kind]})")
            values[key] = value = data.get(key, default)
            if key in data and (not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool)):
                got = f"{type(value).__name__} {value!r}"[:120]
                raise self.fail(
                    f"{where}{key}", f"expected {_KINDS[kind]}, got {got}", f"write {where}{key} as {_KINDS[kind]}"
                )
        return values

    def template(self, text: str, key: str, fields: tuple[str, ...]) -> set[str]:
        try:
            used = template_fields(text)
        except ConfigError as e:
            raise self.fail(key, str(e), "write literal braces as {{ and }}") from None
        for name in sorted(used - set(fields)):
            valid = ", ".join(f"{{{f}}}" for f in fields)
            raise self.fail(
                key, f"unknown field {{{name}}}; valid fields: {valid}", "use one of them or {{ }} for braces"
            )
        return used


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # (an unhashable key is refused by the loader itself; merged keys may be overridden)
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _plain(r: _Reader, value: Any, key: str = "") -> Any:
    """``value`` with every mapping key as text, for the digest; ConfigError naming the key of a lone surrogate."""
    if isinstance(value, str) and unicode_problem(value) is not None:
        raise r.fail(
            key,
            "holds a lone surrogate (an escape such as \\ud800 alone), which is not valid Unicode text",
            "write the character itself, or escape one beyond U+FFFF as \\U0001F600, not as two \\u escapes",
        )
    if isinstance(value, dict):
        return {
            _plain(r, str(k), f"{key}.{k}".lstrip(".")): _plain(r, v, f"{key}.{k}".lstrip("."))
            for k, v in value.items()
        }
    return [_plain(r, v, f"{key}[{i}]") for i, v in enumerate(value)] if isinstance(value, list) else value


def _verdict(r: _Reader, data: object, task: str, scale: tuple[int, ...]) -> VerdictRule:
    where = f"tasks.{task}.verdict."
    v = r.read(data, where, _VERDICT)
    try:
        pattern = re.compile(v["pattern"])
    except re.error as e:
        raise r.fail(f"{where}pattern", f"not a regular expression ({e})", "correct it (Python re syntax)") from None
    if "verdict" not in pattern.groupindex:
        raise r.fail(
            f"{where}pattern", f"{v['pattern']!r} has no named group 'verdict'", "wrap the verdict in (?P<verdict>...)"
        )
    if v["match"] not in _MATCHES:
        raise r.fail(f"{where}match", f"expected one of {', '.join(_MATCHES)}, got {v['match']!r}", "pick one")
    mapping: dict[str, int | str] = {}
    valid: tuple[int | str, ...] = scale if task == "absolute" else ("A", "B")
    for key, value in v["map"].items():
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise r.fail(f"{where}map", f"key {key!r} is not text", "quote it")
        if isinstance(value, bool) or not isinstance(value, (int, str)) or value not in valid:
            raise r.fail(f"{where}map.{key}", f"maps to {value!r}, not a verdict ({valid})", "map to one of them")
        if str(key) in mapping:
            raise r.fail(f"{where}map", f"key {key!r} is given twice (as text and as a number)", "keep one")
        mapping[str(key)] = value
    return VerdictRule(pattern, v["match"], v["at_end"], mapping)


def _task(r: _Reader, data: object, task: str, scale: tuple[int, ...]) -> TaskSpec:
    where = f"tasks.{task}."
    t = r.read(data, where, _TASK)
    fields, system, user, no_ref = FIELDS[task], t["system"], t["user"], t["user_no_reference"]
    used = r.template(system, f"{where}system", fields) | r.template(user, f"{where}user", fields)
    for name in _NEEDED[task]:
        if name not in used:
            raise r.fail(f"{where}user", f"no {{{name}}} field: the judge would not see it", f"put {{{name}}} in it")
    if no_ref is not None and "reference" in r.template(no_ref, f"{where}user_no_reference", fields):
        raise r.fail(f"{where}user_no_reference", "uses {reference}, but it renders when there is none", "remove it")
    when_missing = ([no_ref] if no_ref is not None else [user]) + [system]
    if t["reference_missing"] is None and any("reference" in template_fields(s) for s in when_missing):
        raise r.fail(
            f"{where}user",
            "uses {reference}, but nothing says how a missing reference renders",
            f"add {where}user_no_reference (the message without it) or {where}reference_missing (its text)",
        )
    count = len(scale) if task == "absolute" else 2
    default = [str(s) for s in scale] if task == "absolute" else ["A", "B"]
    labels = default if t["verdict_tokens"] is None else t["verdict_tokens"]
    if len(labels) != count or not all(isinstance(x, str) and x for x in labels):
        what = "the scale's length" if task == "absolute" else "A's then B's"
        fix = f"give {count}, or remove the key for {', '.join(default)}"
        raise r.fail(f"{where}verdict_tokens", f"expected {count} non-empty strings ({what}), got {labels!r}", fix)
    if task == "absolute" and labels != default:
        raise r.fail(f"{where}verdict_tokens", f"{labels!r} are not the scale's numbers {default}", "remove the key")
    rule = _verdict(r, t["verdict"], task, scale)
    return TaskSpec(system, user, no_ref, t["reference_missing"], rule, tuple(labels))


@dataclass(eq=False, repr=False)
class YamlFormat(JudgeFormat):
    """The judge format a YAML file defines, checked (``read_spec``): ``title`` its ``name`` key, ``digest`` the
    SHA-256 of its content as canonical JSON (comments and layout do not change it; ``name`` is ``title@`` its first
    12 digits), ``specs`` its tasks; the others as ``JudgeFormat``'s and the file's keys."""

    path: str
    title: str
    digest: str
    scale: tuple[int, ...]
    force_prefix: str | None
    markers: tuple[str, ...]
    rubric_item: str
    rubric_separator: str
    specs: dict[str, TaskSpec]

    def __post_init__(self) -> None:
        self.name = f"{self.title}@{self.digest[:12]}"
        self.tasks = frozenset(self.specs)  # type: ignore[arg-type]
        self._fields = {  # the fields each task's templates use
            task: set().union(*(template_fields(x) for x in (t.system, t.user, t.user_no_reference or "")))
            for task, t in self.specs.items()
        }
        self._rubric_used = "rubric" in self._fields.get("absolute", ())

    def _task(self, task: Task) -> TaskSpec:
        check_task(self, task)
        return self.specs[task]

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
                fill(self.rubric_item, {"score": str(s), "description": d})
                for s, d in zip(self.scale, rubric.descriptions, strict=True)
            ]
            values["rubric"] = self.rubric_separator.join(items)
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
            f"rubric {rubric.criteria[:60]!r} has {n or 'no'} score descriptions; {self.title} ({self.path}) "
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
        return ParsedOutput(feedback, None, None, f"{self.title}: {why}")


@lru_cache(maxsize=32)
def read_spec(path: str, text: str) -> YamlFormat:
    """The format the ``text`` of the judge format file ``path`` defines, checked (``ConfigError`` naming the key
    and the fix), once per content."""
    r = _Reader(Path(path))
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(
            f"judge format file {str(r.path)!r} is not valid YAML{where}: {problem}; fix: correct the YAML there"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"judge format file {str(r.path)!r} nests its values too deep to read; fix: write it as the flat mapping "
            "of docs/formats.md"
        ) from None
    top = r.read(data, "", _TOP)
    if not _NAME.fullmatch(top["name"]):
        raise r.fail("name", f"{top['name']!r} is not a plain name", "use letters, digits, '.', '_' and '-'")
    tasks = {t: v for t, v in r.read(top["tasks"], "tasks.", _TASKS, "task").items() if v is not None}
    if not tasks:
        raise r.fail("tasks", "no task", "add tasks.absolute (grading) and/or tasks.relative (pairwise)")
    scale = tuple(top["scale"])
    if any(isinstance(s, bool) or not isinstance(s, int) for s in scale):
        raise r.fail("scale", f"expected a list of ints, got {list(scale)!r}", "write scores as integers, low to high")
    if "absolute" in tasks and (len(scale) < 2 or list(scale) != sorted(set(scale))):
        raise r.fail("scale", f"expected 2 or more increasing ints, got {list(scale)!r}", "e.g. [1, 2, 3, 4, 5]")
    if top["force_prefix"] == "":
        raise r.fail("force_prefix", "empty", "give the text before the verdict token, or remove the key")
    for m in top["markers"]:
        if not isinstance(m, str) or not (
            m.startswith("##") and m.lstrip("#").strip() or re.search(r"[!-/:-@[-`{-~]", m)
        ):
            raise r.fail(
                "markers", f"{m!r} cannot be neutralised", "give '###Name', '[WORD]' or a tag with punctuation"
            )
    if "description" not in r.template(top["rubric_item"], "rubric_item", ("score", "description")):
        raise r.fail("rubric_item", "no {description} field", "e.g. 'Score {score}: {description}'")
    specs = {t: _task(r, v, t, scale) for t, v in tasks.items()}
    plain = _plain(r, data)  # (last: every value is now of its type, so no alias loops)
    return YamlFormat(
        path=path,
        title=top["name"],
        digest=hashlib.sha256(json.dumps(plain, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest(),
        scale=scale if "absolute" in specs else (),
        force_prefix=top["force_prefix"],
        markers=tuple(top["markers"]),
        rubric_item=top["rubric_item"],
        rubric_separator=top["rubric_separator"],
        specs=specs,
    )


def load_yaml_format(path: str) -> YamlFormat:
    """The judge format the YAML file ``path`` defines, checked once per content (ConfigError naming the file,
    the key and the fix)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"judge format file {path!r} does not exist; fix: give the path of a YAML judge format file "
            "(docs/formats.md) or a registered format's name"
        )
    return read_spec(str(p), read_text(p, "give a readable YAML judge format file", what="judge format file"))


FORMAT_FILES.register(".yaml", load_yaml_format)
FORMAT_FILES.register(".yml", load_yaml_format)
