"""A verdict written as a judge format's judge writes it (``force_prefix``, verdict, ``force_suffix``): for the
hacking probe's self-grade edit and the reference replay."""

from __future__ import annotations

from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JudgeFormat, Task, check_task

__all__ = ["verdict_text"]


def verdict_text(fmt: JudgeFormat, task: Task, verdict: int | str) -> str:
    """``verdict`` (a score of ``fmt``'s scale, or ``"A"``/``"B"``) as ``fmt``'s judge writes it; ConfigError for
    a task or verdict the format lacks, or a format without a fixed verdict marker.

    >>> from prom_reward.format.judge_format import get_judge_format
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
    prefix = fmt.force_prefix.lstrip()
    return f"{prefix}{label}{fmt.force_suffix}"
