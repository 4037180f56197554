"""The judge's requests in its judge format (one ``GenerationRequest`` per item, tagged with the format's name),
and the check at construction that the format can give what is asked (``ConfigError``)."""

from __future__ import annotations

from prom_reward.backends.base import GenerationRequest
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.core.items import GradeItem, PairItem
from prom_reward.core.sampler import DEFAULT_FORCE_POLICY, ForcePolicy, check_force_policy
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, get_judge_format


def absolute_request(
    item: GradeItem, sampling: SamplingConfig, judge_format: str | JudgeFormat = DEFAULT_FORMAT
) -> GenerationRequest:
    """The judge's request for one absolute item: the format's system and user messages."""
    fmt = get_judge_format(judge_format)
    prompt = fmt.absolute_prompt(item.instruction, item.response, item.rubric, item.reference_answer)
    return GenerationRequest(system=prompt.system, user=prompt.user, sampling=sampling, judge_format=fmt.name)


def relative_request(
    item: PairItem, sampling: SamplingConfig, judge_format: str | JudgeFormat = DEFAULT_FORMAT
) -> GenerationRequest:
    """The judge's request for one pairwise item: the format's system and user messages."""
    fmt = get_judge_format(judge_format)
    prompt = fmt.relative_prompt(item.instruction, item.response_a, item.response_b, item.rubric, item.reference_answer)
    return GenerationRequest(system=prompt.system, user=prompt.user, sampling=sampling, judge_format=fmt.name)


def force_policy(
    fmt: JudgeFormat, *, expected_score: bool, asked: ForcePolicy | None, default: object = DEFAULT_FORCE_POLICY
) -> ForcePolicy:
    """The force policy of a judge in ``fmt``: ``asked``, else ``default`` (its preset's); a format without a
    one-token verdict after a fixed prefix forces ``never`` and refuses ``expected_score``.

    >>> from prom_reward.format.judge_format import get_judge_format
    >>> force_policy(get_judge_format("prometheus2"), expected_score=True, asked=None)
    'cut'
    """
    if fmt.force_prefix is not None:
        return check_force_policy(default if asked is None else asked)
    what = "expected_score=True" if expected_score else f"force_verdict={asked!r}"
    if expected_score or asked not in (None, "never"):
        raise ConfigError(
            f"{what}: judge format {fmt.name!r} has no one-token verdict after a fixed prefix, so it gives no "
            "verdict-token probabilities and cannot force a verdict; fix: drop expected scores and use "
            "force_verdict='never', or pick a format that has one"
        )
    return "never"
