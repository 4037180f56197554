"""The pocket collections: Feedback and Preference Collection stand-ins built from ``vicuna_eval.json``.

``vicuna_eval.json`` holds 80 prompts x 4 responses, each a filled absolute prompt (with reference)
plus three GPT-4 feedbacks and scores. The pocket scale of the recipe uses it as training data:

- the 80 prompts are split by prompt id (``idx``) into train and dev with a seeded shuffle, so no
  prompt crosses the split;
- absolute examples: one per GPT-4 feedback (``feedback [RESULT] k``), three per response;
- pairwise examples: within each prompt, every pair of its 4 responses whose *mean* GPT-4 scores
  differ; the higher mean wins; A/B placement alternates (balanced); the pairwise feedback is the
  labelled concatenation fallback (``feedback_source="concatenate"``: the first GPT-4 feedback of each
  response through ``compose_pair_feedback``) unless ``relative(judge=...)`` has a judge write
  comparative feedback (``train_judge.comparative``);
- ``dev_items``: the dev responses with their mean GPT-4 score, for the correlation benchmark.

Example:
    >>> split = split_prompt_ids(range(1, 81), dev_fraction=0.25, seed=0)
    >>> len(split.train), len(split.dev), set(split.train) & set(split.dev)
    (60, 20, set())
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prom_reward.errors import ConfigError, InputError
from prom_reward.format.templates import parse_absolute_prompt

if TYPE_CHECKING:
    from prom_reward.backends.store import JudgmentStore

from .data import FeedbackRecord, Judges, PairRecord, build_preference_collection
from .layouts import read_local_rows, record_of_prompt


@dataclass(frozen=True)
class PromptSplit:
    """Prompt ids of the train and dev parts."""

    train: tuple[int, ...]
    """Training prompt ids (sorted)."""
    dev: tuple[int, ...]
    """Dev prompt ids (sorted)."""


@dataclass(frozen=True)
class DevItem:
    """One dev response with its reference grade."""

    idx: int
    """Prompt id."""
    source: str
    """Which model wrote the response."""
    instruction: str
    """The task."""
    response: str
    """The graded response."""
    reference_answer: str | None
    """The reference answer."""
    rubric: str
    """The formatted score rubric."""
    mean_score: float
    """Mean of the GPT-4 scores."""


def split_prompt_ids(ids: Iterable[int], *, dev_fraction: float = 0.25, seed: int = 0) -> PromptSplit:
    """Shuffle the distinct ids with ``seed`` and cut off ``dev_fraction`` of them as dev."""
    if not 0 < dev_fraction < 1:
        raise ConfigError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    uniq = sorted(set(ids))
    random.Random(seed).shuffle(uniq)
    n_dev = max(1, round(len(uniq) * dev_fraction))
    return PromptSplit(tuple(sorted(uniq[n_dev:])), tuple(sorted(uniq[:n_dev])))


def load_vicuna(path: str | Path) -> list[dict[str, Any]]:
    """The rows of ``vicuna_eval.json``, checked for the fields used here."""
    p = Path(path)
    fields = {"idx": int, "response_source": str, "instruction": str, "gpt4_score": list, "gpt4_feedback": list}
    rows = read_local_rows(
        p, "pass the path of vicuna_eval.json (benchmarks/data/vicuna_eval.json in a checkout)", fields
    )
    for i, r in enumerate(rows):
        if len(r["gpt4_score"]) != len(r["gpt4_feedback"]) or not r["gpt4_score"]:
            raise InputError(
                f"{p} row {i}: gpt4_score and gpt4_feedback must be non-empty lists of equal length",
                index=i,
                field="gpt4_score",
            )
    return rows


class PocketData:
    """The pocket collections from one ``vicuna_eval.json``.

    Args:
        path: the ``vicuna_eval.json`` file.
        dev_fraction: share of the prompts held out as dev.
        seed: the split seed.
    """

    def __init__(self, path: str | Path, *, dev_fraction: float = 0.25, seed: int = 0) -> None:
        self.rows = load_vicuna(path)
        self.split = split_prompt_ids((r["idx"] for r in self.rows), dev_fraction=dev_fraction, seed=seed)
        self._parts = [parse_absolute_prompt(r["instruction"]) for r in self.rows]

    def _ids(self, part: str) -> set[int]:
        if part not in ("train", "dev"):
            raise ConfigError(f"part must be 'train' or 'dev', got {part!r}")
        return set(self.split.train if part == "train" else self.split.dev)

    def absolute(self, part: str = "train") -> list[FeedbackRecord]:
        """One record per GPT-4 feedback of each response of the part's prompts."""
        ids = self._ids(part)
        out = []
        for r, p in zip(self.rows, self._parts, strict=True):
            if r["idx"] in ids:
                source = f"vicuna-{r['idx']}"
                pairs = zip(r["gpt4_feedback"], r["gpt4_score"], strict=True)
                out += [record_of_prompt(p, fb, int(score), source) for fb, score in pairs]
        return out

    def relative(
        self,
        part: str = "train",
        *,
        judge: Judges | None = None,
        store: str | Path | JudgmentStore | None = None,
        on_failure: str = "drop",
    ) -> list[PairRecord]:
        """Pairs of the part's responses by mean GPT-4 score. Feedback: the first GPT-4 feedback of each
        joined (the labelled ``concatenate`` fallback the shipped judge was trained on), or with ``judge``
        comparative feedback written by it (``build_preference_collection(feedback="model")``)."""
        ids = self._ids(part)
        recs, means = [], []
        for r, p in zip(self.rows, self._parts, strict=True):
            if r["idx"] in ids:
                source = f"vicuna-{r['idx']}"
                recs.append(record_of_prompt(p, r["gpt4_feedback"][0], int(r["gpt4_score"][0]), source))
                means.append(sum(r["gpt4_score"]) / len(r["gpt4_score"]))
        if judge is None:
            return build_preference_collection(recs, scores=means, feedback="concatenate")
        return build_preference_collection(
            recs, scores=means, feedback="model", judge=judge, store=store, on_failure=on_failure
        )

    def dev_items(self) -> list[DevItem]:
        """The dev responses with their mean GPT-4 score."""
        ids = self._ids("dev")
        return [
            DevItem(
                r["idx"],
                r["response_source"],
                p.instruction,
                p.response,
                p.reference_answer,
                p.rubric,
                sum(r["gpt4_score"]) / len(r["gpt4_score"]),
            )
            for r, p in zip(self.rows, self._parts, strict=True)
            if r["idx"] in ids
        ]
