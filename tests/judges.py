"""Scripted judges shared by the tests: real ``PrometheusJudge`` objects over a ``ScriptedBackend`` that
answers from the text it is asked to judge, so a test states what the judge thinks of each response
and asserts on what came back. (Model-free: they test logic; real engines are the session fixtures.)

- ``judge_by_response({"4": "Right. [RESULT] 5"})``: absolute prompts answered by the response's text
  (exact match; ``default`` for anything else: no verdict unless told).
- ``judge_by_rank({"good": 3, "fair": 2, "bad": 1})``: absolute prompts get a score from the rank of the
  response's first word (``scores``), pairwise prompts the higher-ranked side (``tie=``: the side picked on
  equal ranks).
- ``judge_by_format("selene", {"good": 5})``: any format's prompts answered in that format's own output
  (``tests.judge_answers``, as the ``StandInJudge`` server answers), graded by the response's first word.
- ``response_of(request)``, ``pair_of(request)``: the text(s) a request asks about.
- ``verdict_output(fmt, task, verdict)``: a whole output of any judge format giving that verdict.
- ``Calibrator(probs)``: a scripted teacher-forcing backend, a base model for SE-Cali (``calibrated_judge(base=...)``).

Each takes ``seen=`` (a list that collects the requests) and any ``PrometheusJudge`` option.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from prom_reward.backends.base import BackendCapabilities, GenerationRequest, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.judge import PrometheusJudge
from prom_reward.format.judge_format import JudgeFormat, Task
from tests.judge_answers import answer, read_prompt

NO_VERDICT = "I cannot tell."


def response_of(request: GenerationRequest) -> str:
    """The response an absolute-grading request shows the judge."""
    return request.user.split("###Response to evaluate:\n", 1)[1].split("\n\n###", 1)[0].rstrip("\n")


def pair_of(request: GenerationRequest) -> tuple[str, str]:
    """(response A, response B) of a pairwise request."""
    a = request.user.split("###Response A:\n", 1)[1].split("\n\n###", 1)[0].rstrip("\n")
    b = request.user.split("###Response B:\n", 1)[1].split("\n\n###", 1)[0].rstrip("\n")
    return a, b


def verdict_output(fmt: JudgeFormat, task: Task, verdict: int | str) -> str:
    """A whole output of ``fmt``'s judge giving ``verdict`` (a score of its scale, or "A"/"B"): the forced shape
    (``forcing_body(feedback) + force_prefix + label + force_suffix``, which the format's parser reads), or Con-J's
    JSON for a format without a fixed verdict marker; the first the format's own parser reads as ``verdict``."""
    labels = [str(s) for s in fmt.scale] if task == "absolute" else ["A", "B"]
    label = fmt.verdict_labels(task)[labels.index(str(verdict))]
    shapes = [
        (fmt.forcing_body(body) or "") + (fmt.force_prefix or "") + label + fmt.force_suffix
        for body in ("Judged by the stand-in.", "")
    ]
    shapes.append(json.dumps({"原因": "Judged.", "更好的回答": labels.index(str(verdict)) + 1}, ensure_ascii=False))
    for text in shapes:
        if fmt.parse(text, task).verdict == verdict:
            return text
    raise AssertionError(f"no output of judge format {fmt.name!r} reads as {verdict!r}: add its shape here")


def _options(options: dict[str, Any]) -> dict[str, Any]:
    return {"max_retries": 0, **options}


def judge_by_response(
    table: dict[str, str], *, default: str = NO_VERDICT, seen: list[GenerationRequest] | None = None, **options: Any
) -> PrometheusJudge:
    """A judge whose output for an absolute prompt is ``table[response]`` (``default`` otherwise)."""

    def respond(request: GenerationRequest, i: int) -> str:
        if seen is not None:
            seen.append(request)
        if "###Response to evaluate:\n" not in request.user:
            return default
        return table.get(response_of(request), default)

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), **_options(options))


def judge_by_rank(
    rank: dict[str, int],
    *,
    scores: dict[int, int] | None = None,
    tie: str | None = None,
    seen: list[GenerationRequest] | None = None,
    **options: Any,
) -> PrometheusJudge:
    """A judge that ranks responses by ``rank[first word]``: absolute prompts get ``scores[rank]`` (default: the
    rank itself, clipped to 1..5); pairwise prompts the higher-ranked side (on equal ranks ``tie``: "A", "B", or
    None for no verdict; no verdict for an unknown word)."""

    def level(text: str) -> int | None:
        words = text.split()
        return rank.get(words[0]) if words else None

    def respond(request: GenerationRequest, i: int) -> str:
        if seen is not None:
            seen.append(request)
        if "###Response to evaluate:\n" in request.user:
            r = level(response_of(request))
            if r is None:
                return NO_VERDICT
            score = scores[r] if scores is not None else min(max(r, 1), 5)
            return f"Scored by rank. [RESULT] {score}"
        a, b = (level(x) for x in pair_of(request))
        if a is None or b is None or (a == b and tie is None):
            return NO_VERDICT
        return f"Compared by rank. [RESULT] {tie if a == b else 'A' if a > b else 'B'}"

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), **_options(options))


def judge_by_format(
    fmt: Any, grades: dict[str, int], *, default: int = 3, seen: list[GenerationRequest] | None = None, **options: Any
) -> PrometheusJudge:
    """A judge in format ``fmt`` answering as that format's judge does (``tests.judge_answers``): a response's grade
    is ``grades[first word]`` (1..5, else ``default``) on the format's scale; a pair goes to the higher (A on a tie)."""

    def grade(text: str) -> int:
        words = text.split()
        return grades.get(words[0], default) if words else default

    def respond(request: GenerationRequest, i: int) -> str:
        if seen is not None:
            seen.append(request)
        read = read_prompt(request.system, request.user)
        return NO_VERDICT if read is None else answer(read, tuple(grade(t) for t in read.texts))

    return PrometheusJudge(backend=ScriptedBackend(respond=respond), format=fmt, **_options(options))


class Calibrator:
    """A scripted teacher-forcing backend (an SE-Cali base model, ``experimental.calibrated_judge(base=...)``): every
    whitespace-separated word of a continuation is one token (``probs``'s first key) with the distribution ``probs``;
    ``calls`` records
    each ``continuation_logprobs`` call's (requests, continuations, top_k)."""

    name = "calibrator"
    capabilities = BackendCapabilities(
        tokens_at_most_bytes=False, streams_results=False, thread_safe=False, continuation_logprobs=True
    )

    def __init__(self, probs: dict[str, float]) -> None:
        self.probs = probs
        self.calls: list[tuple[list[GenerationRequest], list[str], int]] = []

    async def acontinuation_logprobs(
        self,
        requests: Sequence[GenerationRequest],
        continuations: Sequence[str],
        top_k: int = 20,
        deadline: float | None = None,
    ) -> list[tuple[TokenLogprobs, ...]]:
        self.calls.append((list(requests), list(continuations), top_k))
        first = next(iter(self.probs))
        top = {k: math.log(v) for k, v in self.probs.items()}
        return [tuple(TokenLogprobs(first, top[first], top) for _ in text.split()) for text in continuations]

    def close(self) -> None:
        pass
