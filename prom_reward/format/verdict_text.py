"""A verdict written the way a judge format's judge writes it (its ``force_prefix``, the verdict, its
``force_suffix``): for the hacking probe's self-grade edit and the reference replay.

Example:
    >>> from prom_reward.format.judge_format import get_judge_format
    >>> import prom_reward.format.formats  # registers the formats
    >>> verdict_text(get_judge_format("prometheus2"), "absolute", 5)
    '[RESULT] 5'
    >>> verdict_text(get_judge_format("flow-judge-3"), "absolute", 3)
    '<score>3</score>'
    >>> verdict_text(get_judge_format("rm-r1"), "relative", "B")
    '<answer>[[B]]</answer>'
    >>> verdict_text(get_judge_format("offsetbias"), "relative", "A")
    'Output (a)'
"""

from __future__ import annotations

from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JudgeFormat, Task, check_task

__all__ = ["verdict_text"]


def verdict_text(fmt: JudgeFormat, task: Task, verdict: int | str) -> str:
    """``verdict`` (a score of ``fmt``'s scale, or ``"A"``/``"B"``) written as ``fmt``'s judge writes it; a task
    the format does not judge, a verdict it cannot give, or a format without a fixed verdict marker raise
    ``ConfigError`` naming the format and what it supports."""
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
    prefix = fmt.force_prefix.lstrip()
    return f"{prefix}{label}{fmt.force_suffix}"
