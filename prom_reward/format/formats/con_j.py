"""Con-J (``con-j``): rewardbench 0.1.4's Chinese pairwise prompt, and a strict parser of its JSON verdict
``{"原因": "...", "更好的回答": 1|2}`` (docs/formats.md); no forced verdicts."""

from __future__ import annotations

import json
import re
from typing import Any

from prom_reward.format.eos import content_end
from prom_reward.format.formats.pairwise_only import PairwiseOnlyFormat, failure
from prom_reward.format.judge_format import JUDGE_FORMATS, Task
from prom_reward.format.parsing import ParsedOutput

CON_J_PROMPT = (
    "作为一个评价专家，给定一个问题和它的两个可能的回答，请选出哪一个回答在连贯性、准确性、覆盖度和上述定义的整体质量方面最为符合。"
    '请用JSON格式输出你的判断, 其中"原因"是你提供的解释，"更好的回答"是整数类型的1或2，'
    '例如{{"原因": "你的解释", "更好的回答": 1}}。以下是问题和候选回答的内容：\n'
    "    \n问题：{instruction}\n回答1：{response_a}\n回答2：{response_b}"
)
VERDICT_KEY = "更好的回答"
REASON_KEY = "原因"

_FENCE = "```"
_VALUE = re.compile(r'(?<!\\)"' + VERDICT_KEY + r'"\s*:\s*(?:"\s*)?(?P<v>[12１２])')
_VERDICTS = {"1": "A", "2": "B", "１": "A", "２": "B"}


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if [k for k, _ in pairs].count(VERDICT_KEY) > 1:
        raise _DuplicateKey(VERDICT_KEY)
    return dict(pairs)


def _unfenced(text: str) -> tuple[int, int]:
    """(start, end) of the output without trailing EOS tokens and a ```` ```json ```` fence around it."""
    end = content_end(text)
    start = len(text) - len(text.lstrip())
    if end - start >= 2 * len(_FENCE) and text.startswith(_FENCE, start) and text.endswith(_FENCE, 0, end):
        start, end = start + len(_FENCE), end - len(_FENCE)
        if text[start : start + 4].lower() == "json":
            start += 4
    return start, end


class ConJFormat(PairwiseOnlyFormat):
    """Con-J: rewardbench's ``CON_J_PROMPT``; the verdict is ``"更好的回答": 1|2`` in a JSON object."""

    name = "con-j"
    force_prefix = None
    markers = ("问题：", "回答1：", "回答2：")
    template = CON_J_PROMPT

    def verdict_labels(self, task: Task) -> tuple[str, ...]:
        return ("1", "2")

    def parse_relative(self, text: str) -> ParsedOutput:
        start, end = _unfenced(text)
        body = text[start:end].strip()
        if not body.startswith("{"):
            return failure(body, f"con-j: expected one JSON object with {VERDICT_KEY!r}, got {body[:40]!r}")
        decoder = json.JSONDecoder(strict=False, object_pairs_hook=_no_duplicates)
        try:
            obj, used = decoder.raw_decode(body)
        except _DuplicateKey:
            return failure(body, f"con-j: two {VERDICT_KEY!r} keys in the JSON object (two verdicts)")
        except json.JSONDecodeError as e:
            return failure(body, f"con-j: the JSON object does not parse ({e.msg} at {e.pos}); unclosed or cut?")
        except RecursionError:  # a degenerate output nesting brackets thousands deep
            return failure(body, "con-j: the JSON object is nested too deep to read")
        if body[used:].strip():
            return failure(body, f"con-j: text follows the JSON object ({body[used:].strip()[:40]!r})")
        reason = obj.get(REASON_KEY)
        feedback = reason.strip() if isinstance(reason, str) else ""
        if VERDICT_KEY not in obj:
            return failure(feedback, f"con-j: the JSON object has no {VERDICT_KEY!r} key (keys: {list(obj)[:5]})")
        value = obj[VERDICT_KEY]
        verdict = _VERDICTS.get(str(value).strip()) if isinstance(value, (int, str)) else None
        if verdict is None or isinstance(value, bool):
            return failure(feedback, f"con-j: {VERDICT_KEY!r} is {obj[VERDICT_KEY]!r}, expected 1 or 2")
        found = list(_VALUE.finditer(text, start, end))
        return ParsedOutput(feedback, verdict, found[-1].start("v") if found else None)


CON_J = JUDGE_FORMATS.register("con-j", ConJFormat())
