"""REFERENCE REPLAY: a backend that returns *recorded* judgments (e.g. GPT-4's) instead of generating.

This is not a model. It exists for evaluation: a benchmark file that carries a strong
judge's recorded feedback and scores (``vicuna_eval.json`` has three GPT-4 judgments
per item) can stand in as the fallback of a ``prom_reward.experimental.CascadeJudge``, so the cascade's quality
can be measured against a real reference judgment without calling that judge again.
Every result it produces is a replay, and its ``name`` says so.

Records are keyed by the filled judge template (``GenerationRequest.user``, what
``render_absolute``/``render_relative`` produce). Sample ``j`` of a request replays the
item's recorded judgment ``j`` (cycling when more samples are asked than were recorded).
A prompt without a record raises ``InputError`` naming the item, before anything is
returned. Build the replaying judge with ``neutralize_markers=False`` so rendered
prompts stay byte-identical to the file's.

The recorded verdicts are written in the replaying judge's format (``judge_format``, Prometheus 2 by default;
``format.judge_format.verdict_text``): ``[RESULT] 4``, ``**Result:** B``, ``[[A]]`` ... so its parser reads them. A
``vicuna_eval.json`` holds Prometheus 2 prompts and GPT-4 grades on 1..5, so it replays in a format with that
scale; human pairwise labels replay in any format with pairwise verdicts and a fixed verdict marker (others are
refused at start, naming what the format supports).

Example:
    >>> from prom_reward.backends.base import GenerationRequest
    >>> b = ReferenceReplayBackend({"PROMPT": ["Recorded feedback. [RESULT] 4"]}, source="a test record")
    >>> b.generate([GenerationRequest("sys", "PROMPT", n=2)])[0].completions[1].text
    'Recorded feedback. [RESULT] 4'
    >>> b.generate([GenerationRequest("sys", "other")])  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InputError: reference replay (a test record): item 0 has no recorded judgment ...
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prom_reward.backends.base import (
    BackendCapabilities,
    BackendFingerprint,
    Completion,
    GenerationRequest,
    GenerationResult,
    make_fingerprint,
)
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, get_judge_format, verdict_text
from prom_reward.format.rubrics import get_rubric


def _list(value: Any) -> list[Any]:
    """The benchmark files store lists as Python-literal strings (``"[5, 4, 5]"``)."""
    if isinstance(value, str):
        value = ast.literal_eval(value)
    return list(value)


class ReferenceReplayBackend:
    """Replays recorded judgments keyed by the filled judge template. Not a model (see module doc).

    Args:
        records: filled template -> recorded judge outputs (each ending with its verdict in the judge's format).
        source: what the records are (shown in ``name`` and errors), e.g. ``"GPT-4, vicuna_eval.json"``.
    """

    capabilities = BackendCapabilities(
        tokens_at_most_bytes=False, streams_results=False, thread_safe=False, continuation_logprobs=False
    )
    gpu_memory_share = None  # no engine

    def __init__(self, records: Mapping[str, Sequence[str]], *, source: str = "recorded judgments") -> None:
        self.records = {str(k): [str(o) for o in v] for k, v in records.items()}
        empty = [k for k, v in self.records.items() if not v]
        if empty:
            raise InputError(
                f"reference replay: a record has no judgments (prompt starting {empty[0][:60]!r}); "
                "give at least one output per prompt",
                field="records",
            )
        self.source = source
        self.name = f"reference_replay[{source}]"
        self.replayed = 0
        """Outputs replayed so far."""

    @classmethod
    def from_vicuna_eval(
        cls, path: str | Path, judge_format: str | JudgeFormat = DEFAULT_FORMAT
    ) -> ReferenceReplayBackend:
        """The GPT-4 judgments of a ``vicuna_eval.json``-style file (``instruction`` = filled template,
        ``gpt4_feedback`` and ``gpt4_score`` = parallel lists), written in ``judge_format`` (its scale must be
        GPT-4's 1..5)."""
        fmt = get_judge_format(judge_format)
        if fmt.scale != (1, 2, 3, 4, 5):
            raise ConfigError(
                f"reference replay: {Path(path).name} holds grades on 1..5, but judge format {fmt.name!r} grades on "
                f"{'..'.join(map(str, fmt.scale[:: max(len(fmt.scale) - 1, 1)])) or 'no scale'}; fix: replay it "
                "in a 1..5 format (prometheus2, m-prometheus, flow-judge)"
            )
        verdict_text(fmt, "absolute", 5)  # a format without a verdict marker: refused before reading
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        records: dict[str, list[str]] = {}
        for i, row in enumerate(rows):
            try:
                feedback, scores = _list(row["gpt4_feedback"]), _list(row["gpt4_score"])
            except (KeyError, ValueError, SyntaxError) as e:
                raise InputError(
                    f"{path}: row {i}: expected gpt4_feedback and gpt4_score lists ({e})", index=i, field="gpt4_score"
                ) from e
            if len(feedback) != len(scores):
                raise InputError(
                    f"{path}: row {i}: gpt4_feedback has {len(feedback)} entries but gpt4_score "
                    f"{len(scores)}; they are parallel lists (one score per feedback)",
                    index=i,
                    field="gpt4_score",
                )
            records[row["instruction"]] = [
                f"{fb.strip()} {verdict_text(fmt, 'absolute', int(s))}" for fb, s in zip(feedback, scores, strict=True)
            ]
        return cls(records, source=f"GPT-4 recorded in {Path(path).name}")

    @classmethod
    def from_autoj_pairwise(
        cls, path: str | Path, rubric: Any = "helpfulness", judge_format: str | JudgeFormat = DEFAULT_FORMAT
    ) -> ReferenceReplayBackend:
        """The human labels of an ``autoj_pairwise.jsonl``-style file as pairwise verdicts, in both
        orders (``label`` 0: response 1 better, 1: response 2 better; ties, label 2, get no record).
        Prompts are rendered in ``judge_format`` with ``rubric``: judge in the same format, with the same rubric."""
        fmt = get_judge_format(judge_format)
        verdict_text(fmt, "relative", "A")  # refused at start when the format cannot write a pairwise verdict
        rub = get_rubric(rubric)

        def prompt(instruction: str, a: str, b: str) -> str:
            return fmt.relative_prompt(instruction, a, b, rub, None).user

        def said(label: int, verdict: str) -> str:
            text = verdict_text(fmt, "relative", verdict)
            noted = f"Human label: response {label + 1} is better.\n\n{text}"
            return noted if fmt.parse(noted, "relative").verdict == verdict else text  # a verdict-only format

        records: dict[str, list[str]] = {}
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                row = json.loads(line)
                label = int(row.get("label", -1))
                if label not in (0, 1, 2):
                    raise InputError(
                        f"{path}: row {i}: label must be 0, 1 or 2, got {row.get('label')!r}", index=i, field="label"
                    )
                if label == 2:
                    continue
                first, second = row["response 1"], row["response 2"]
                better = "A" if label == 0 else "B"
                worse = "B" if better == "A" else "A"
                records[prompt(row["prompt"], first, second)] = [said(label, better)]
                records[prompt(row["prompt"], second, first)] = [said(label, worse)]
        return cls(records, source=f"human labels recorded in {Path(path).name}")

    @property
    def fingerprint(self) -> BackendFingerprint:
        """Its name (which names the records' source): no model, no wire format."""
        return make_fingerprint(self.name)

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """``generate``, directly (a dictionary look-up)."""
        return self.generate(requests)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        for i, r in enumerate(requests):
            if r.user not in self.records:
                raise InputError(
                    f"reference replay ({self.source}): item {i} has no recorded judgment (prompt starting "
                    f"{r.user[:80]!r}); it can only answer for the {len(self.records)} prompts it was given: "
                    "judge items from that file, rendered unchanged (neutralize_markers=False)",
                    index=i,
                    field="instruction",
                )
            if r.assistant_prefix:
                raise InputError(
                    f"reference replay ({self.source}): item {i} asks to continue a prefix; a replay "
                    "cannot force verdicts (build its judge with force_verdict='never')",
                    index=i,
                )
        out = []
        for r in requests:
            recorded = self.records[r.user]
            texts = [recorded[j % len(recorded)] for j in range(r.n)]
            self.replayed += len(texts)
            out.append(
                GenerationResult(
                    tuple(Completion(t, finish_reason="stop", completion_tokens=len(t.split())) for t in texts),
                    prompt_tokens=len(r.user.split()),
                )
            )
        return out

    async def acount_tokens(self, requests: Sequence[GenerationRequest], deadline: float | None = None) -> list[int]:
        """Word counts (a replay has no tokenizer)."""
        return [len(r.user.split()) for r in requests]

    async def acontext_length(self, deadline: float | None = None) -> int | None:
        return None

    def special_tokens(self) -> tuple[str, ...]:
        return ()  # no tokenizer

    def close(self) -> None:
        pass
