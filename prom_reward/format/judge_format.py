"""The judge-format seam: a judge model's whole text interface as one object (``JudgeFormat``: prompts, parser,
verdict tokens, forcing prefix, markers), registered by name in ``JUDGE_FORMATS`` (``get_judge_format``)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from prom_reward.errors import ConfigError
from prom_reward.format.eos import drop_cut_marker, strip_eos
from prom_reward.format.parsing import ParsedOutput, Task
from prom_reward.format.rubrics import Rubric
from prom_reward.registry import Registry

DEFAULT_FORMAT = "prometheus2"
"""The format of a judge whose preset and user name none."""


@dataclass(frozen=True)
class Prompt:
    """The messages of one judge prompt, before the wire format renders them (``system`` ``""``: none sent)."""

    system: str
    user: str


class JudgeFormat(ABC):
    """One judge model's text interface; subclasses set the attributes and implement the prompts and the parser."""

    name: str
    """Registry key, e.g. ``prometheus2``; judgment stores key on it."""
    tasks: frozenset[Task]
    """What it judges: ``{"absolute"}``, ``{"relative"}`` or both."""
    scale: tuple[int, ...]
    """Absolute verdicts, low to high: ``(1, 2, 3, 4, 5)``; a binary scale ``(0, 1)``; ``()`` if pairwise-only."""
    force_prefix: str | None
    """Text after which the verdict is ONE token (`` [RESULT] ``, ``<score>``, ``[[``); None: it is not, so expected
    scores and forced verdicts are refused at start."""
    force_suffix: str = ""
    """Text that closes a forced verdict: ``forcing_body(text) + force_prefix + label + force_suffix`` parses as
    ``label``'s verdict."""
    markers: tuple[str, ...]
    """The format's section tags and markers, neutralised inside judged texts (``format.sanitize``)."""

    def absolute_prompt(self, instruction: str, response: str, rubric: Rubric, reference: str | None) -> Prompt:
        """The prompt grading ``response`` against ``rubric``; by default a refusal (the format does not grade)."""
        raise unsupported_task(self, "absolute", "use it with compare, pairs or a pairwise reward")

    def relative_prompt(
        self, instruction: str, response_a: str, response_b: str, rubric: Rubric, reference: str | None
    ) -> Prompt:
        """The prompt asking which response is better; by default the refusal of a format that does not compare."""
        raise unsupported_task(self, "relative")

    @abstractmethod
    def parse(self, text: str, task: Task) -> ParsedOutput:
        """Feedback and verdict (a ``scale`` int or ``"A"``/``"B"``; None with a ``reason``); never raises."""

    def rubric_problem(self, rubric: Rubric, task: Task) -> str | None:
        """Why ``rubric`` cannot be used for ``task`` (what it needs and the fix); None when it fits."""
        return None

    def uses_rubric(self, task: Task) -> bool:
        """Whether ``task``'s prompt shows a rubric; False: a rubric is accepted and ignored, so none is needed."""
        return True

    def verdict_labels(self, task: Task) -> tuple[str, ...]:
        """The verdict token texts read for expected scores: the scale's numbers, or ``("A", "B")``."""
        return tuple(str(s) for s in self.scale) if task == "absolute" else ("A", "B")

    def forcing_body(self, text: str) -> str | None:
        """The text a verdict is forced after (``force_prefix`` follows), with what a cut output left open closed;
        None when the output already wrote its verdict marker (re-sampled, not forced)."""
        body = strip_eos(text)
        marker = (self.force_prefix or "").strip()
        if not marker:
            return body.rstrip()
        cut = drop_cut_marker(body, marker)
        if cut is not None:
            return cut.rstrip()
        return None if marker.lower() in body.lower() else body.rstrip()

    def __repr__(self) -> str:
        return f"<JudgeFormat {self.name}>"


_TASK_WORDS = {"absolute": "grading one response", "relative": "pairwise verdicts"}


def unsupported_task(fmt: JudgeFormat, task: Task, fix: str = "") -> ConfigError:
    """The error of asking ``fmt`` for a ``task`` it does not judge: what it supports, and the fix (``fix``, then
    the registered formats that judge ``task``)."""
    scores = f", scores {fmt.scale[0]}-{fmt.scale[-1]}" if fmt.scale else ""
    supports = [f"{t} ({_TASK_WORDS.get(t, t)}{scores if t == 'absolute' else ''})" for t in sorted(fmt.tasks)]
    others = ", ".join(n for n in JUDGE_FORMATS if task in JUDGE_FORMATS.get(n).tasks and n != fmt.name)
    fixes = [f for f in (fix, f"pick a format that does ({others})" if others else "") if f]
    return ConfigError(
        f"judge format {fmt.name!r} does not judge {task} ({_TASK_WORDS.get(task, task)}); it supports "
        f"{', '.join(supports) or 'nothing'}; fix: {', or '.join(fixes) or 'define a format that does'}"
    )


def check_task(fmt: JudgeFormat, task: Task, fix: str = "") -> None:
    """Raise ``unsupported_task(fmt, task, fix)`` when ``fmt`` does not judge ``task``."""
    if task not in fmt.tasks:
        raise unsupported_task(fmt, task, fix)


JUDGE_FORMATS: Registry[JudgeFormat] = Registry("judge format")
"""The registered judge formats by name (filled by ``prom_reward.format.formats``)."""
FORMAT_FILES: Registry[Callable[[str], JudgeFormat]] = Registry("judge format file suffix")
"""Loaders of judge formats defined in files, by suffix (``.yaml``, ``.yml``: ``formats.from_yaml``)."""


def get_judge_format(name_or_obj: str | JudgeFormat) -> JudgeFormat:
    """The format registered as ``name_or_obj`` (any case), defined by a ``.yaml``/``.yml`` file, or passed;
    an unknown name raises ``UnknownNameError`` listing the valid names.

    >>> get_judge_format("M-Prometheus").name
    'm-prometheus'
    """
    if isinstance(name_or_obj, JudgeFormat):
        return name_or_obj
    if isinstance(name_or_obj, os.PathLike):
        name_or_obj = os.fspath(name_or_obj)
    if not isinstance(name_or_obj, str):
        raise ConfigError(
            f"format: expected a judge format name ({', '.join(JUDGE_FORMATS)}), a .yaml file or a JudgeFormat, got "
            f"{type(name_or_obj).__name__}"
        )
    suffix = os.path.splitext(name_or_obj)[1]
    if suffix and suffix in FORMAT_FILES:
        return FORMAT_FILES.get(suffix)(name_or_obj)
    return JUDGE_FORMATS.get(name_or_obj)


def verdict_text(fmt: JudgeFormat, task: Task, verdict: int | str) -> str:
    """``verdict`` (a score of ``fmt``'s scale, or ``"A"``/``"B"``) as ``fmt``'s judge writes it; ConfigError for
    a task or verdict the format lacks, or a format without a fixed verdict marker.

    >>> verdict_text(get_judge_format("flow-judge-3"), "absolute", 3)
    '<score>3</score>'
    """
    check_task(fmt, task)
    if fmt.force_prefix is None:
        raise ConfigError(
            f"judge format {fmt.name!r} writes its verdict without a fixed marker (force_prefix None), so a verdict "
            "cannot be written in it; fix: use a format with one"
        )
    verdicts = [str(s) for s in fmt.scale] if task == "absolute" else ["A", "B"]
    if str(verdict) not in verdicts:
        raise ConfigError(f"judge format {fmt.name!r}: verdict {verdict!r} is not one of {', '.join(verdicts)}")
    label = fmt.verdict_labels(task)[verdicts.index(str(verdict))]
    return f"{fmt.force_prefix.lstrip()}{label}{fmt.force_suffix}"
