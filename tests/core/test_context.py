"""Context checks: what is counted, what is known to fit without counting, and the bound behind it."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from prom_reward import PrometheusJudge
from prom_reward.backends.base import GenerationRequest, GenerationResult
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.judge import TEMPLATE_MARGIN, surely_fits


class ByteBoundBackend(ScriptedBackend):
    """A scripted backend that declares the one-token-per-byte bound and records what it counts."""

    capabilities = dataclasses.replace(ScriptedBackend.capabilities, tokens_at_most_bytes=True)

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.counted: list[int] = []

    async def acount_tokens(self, requests, deadline=None):
        self.counted.append(len(requests))
        return await super().acount_tokens(requests, deadline)

    def generate(self, requests):  # its prompt-token accounting is not a context check
        self.calls.append(list(requests))
        counts = self._count(requests)
        return [
            GenerationResult(tuple(self._next(r, i) for i in range(r.n)), prompt_tokens=c)
            for r, c in zip(requests, counts, strict=True)
        ]


@pytest.mark.parametrize(
    "user_bytes,max_tokens,limit,fits",
    [
        (100, 100, 100 + 100 + TEMPLATE_MARGIN + 3, True),  # "s" + "u"*100 + margin + max_tokens = limit - 2
        (100, 100, 101 + 100 + TEMPLATE_MARGIN, True),  # exactly at the limit
        (100, 100, 100 + 100 + TEMPLATE_MARGIN, False),  # one byte over
        (4000, 1024, 8192, True),
        (7000, 1024, 8192, False),
    ],
)
def test_surely_fits_is_bytes_plus_margin_plus_max_tokens(user_bytes, max_tokens, limit, fits):
    req = GenerationRequest("s", "u" * user_bytes, sampling=SamplingConfig(max_tokens=max_tokens))
    assert surely_fits(req, limit) is fits


def test_multibyte_text_counts_bytes_not_characters():
    req = GenerationRequest("", "é" * 100, sampling=SamplingConfig(max_tokens=1))
    assert not surely_fits(req, 100 + TEMPLATE_MARGIN + 99) and surely_fits(req, 201 + TEMPLATE_MARGIN)


def test_items_known_to_fit_are_not_counted():
    b = ByteBoundBackend(respond=lambda r, i: "ok [RESULT] 3", context=8192)
    judge = PrometheusJudge(backend=b, sampling={"max_tokens": 100})
    judge.grade(["q", "q"], ["short", "word " * 1500], "helpfulness")
    assert b.counted == [1]  # only the long item was counted (and it fits: 1500 words ~ 1500 tokens)


def test_a_long_item_is_still_counted_and_fails_alone():
    b = ByteBoundBackend(respond=lambda r, i: "ok [RESULT] 3", context=600)
    judge = PrometheusJudge(backend=b, sampling={"max_tokens": 100})
    short, long = judge.grade(["q", "q"], ["short", "word " * 800], "helpfulness")
    assert b.counted == [2] and len(b.calls) == 1 and len(b.calls[0]) == 1  # only the short one is sampled
    assert short.score == 3.0 and short.error is None
    assert long.score is None and long.error is not None and long.error.kind == "input"
    assert "the judge context is 600 tokens" in long.error.reason and not long.error.reason.startswith("item")


def test_backends_without_the_bound_count_everything():
    b = ByteBoundBackend(respond=lambda r, i: "ok [RESULT] 3", context=8192)
    b.capabilities = ScriptedBackend.capabilities
    PrometheusJudge(backend=b).grade(["q", "q"], ["a", "b"], "helpfulness")
    assert b.counted == [2]


@pytest.mark.smollm2
def test_real_tokenizer_never_exceeds_the_byte_bound(smollm2_dir, tiny_model_dir, data_dir):
    """The bound holds for real judge prompts through real chat templates (ChatML with a system
    role, and the tiny model's Mistral-style template that folds the system prompt)."""
    from transformers import AutoTokenizer

    from prom_reward.format.templates import ABS_SYSTEM_PROMPT
    from prom_reward.format.wire import get_wire_format

    prompts = [row["instruction"] for row in json.loads((data_dir / "vicuna_eval.json").read_text())]
    prompts += ["ünïcödé ✓ 数学 🙂 " * 200, "\n\n  \t" * 300]
    for folder, role in ((smollm2_dir, True), (tiny_model_dir, False)):
        tok = AutoTokenizer.from_pretrained(str(folder))
        wire = get_wire_format("chat")
        for p in prompts:
            ids = tok.apply_chat_template(
                wire.messages(ABS_SYSTEM_PROMPT, p, system_role=role), tokenize=True, add_generation_prompt=True
            )
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            size = len(ABS_SYSTEM_PROMPT.encode()) + len(p.encode())
            assert len(ids) <= size + TEMPLATE_MARGIN, (folder.name, len(ids), size)


class Deadlines(ScriptedBackend):
    """A scripted backend recording the deadline each context question is asked with."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.asked: list[tuple[str, float | None]] = []

    async def acontext_length(self, deadline=None):
        self.asked.append(("context", deadline))
        return await super().acontext_length(deadline)

    async def acount_tokens(self, requests, deadline=None):
        self.asked.append(("count", deadline))
        return await super().acount_tokens(requests, deadline)


def test_the_context_check_asks_the_backend_within_the_calls_deadline():
    import time

    backend = Deadlines(outputs=["Fine. [RESULT] 4"], context=4096)
    judge = PrometheusJudge(backend=backend)
    deadline = time.monotonic() + 60
    (grade,) = asyncio.run(judge.agrade(["Say hi."], ["hi"], "helpfulness", deadline=deadline))
    assert grade.score == 4.0
    assert backend.asked == [("context", deadline), ("count", deadline)]
    assert backend.calls[0][0].deadline == deadline
