"""Making sure every judge prompt fits the judge's context window (``prompt_tokens + max_tokens <=
context_length``): an item that does not fit fails alone, or has its response(s) shortened (``truncate``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from prom_reward.backends.base import Backend, GenerationRequest
from prom_reward.core.items import Item
from prom_reward.errors import ContextLengthError, InputError

_MAX_STEPS = 8
TEMPLATE_MARGIN = 256  # tokens a chat template may add around the text (role headers, BOS ...)


def surely_fits(request: GenerationRequest, limit: int) -> bool:
    """True when the request fits ``limit`` whatever the tokenizer, given at most one token per byte."""
    size = len(request.system.encode()) + len(request.user.encode()) + len(request.assistant_prefix.encode())
    return size + TEMPLATE_MARGIN + request.sampling.max_tokens <= limit


def _shorten(item: Item, fraction: float) -> Item:
    """``item`` with its response(s) cut to ``fraction`` of the longest (a shorter one of a pair stays whole)."""
    cap = max(0, int(max(len(getattr(item, name)) for name in item.RESPONSES) * fraction))
    return dataclasses.replace(item, **{name: getattr(item, name)[:cap] for name in item.RESPONSES})


async def fit_to_context(
    backend: Backend,
    requests: list[GenerationRequest],
    items: list[Item],
    render: Callable[[Item], GenerationRequest],
    truncate: bool,
    known: Sequence[bool] | None = None,
    deadline: float | None = None,
) -> tuple[list[GenerationRequest], list[bool], list[InputError | None]]:
    """Check (and optionally truncate) every request (``items``: what each was rendered from); returns the requests,
    truncated flags and, per item, the ``InputError`` of one that cannot fit. ``known``: per request, True where a
    judgment store holds its answer (not checked). ``deadline`` bounds what the backend is asked."""
    truncated = [False] * len(requests)
    errors: list[InputError | None] = [None] * len(requests)
    check = [i for i in range(len(requests)) if not (known and known[i])]
    limit = await backend.acontext_length(deadline) if check else None
    at_most_bytes = backend.capabilities.tokens_at_most_bytes
    check = [i for i in check if limit is not None and not (at_most_bytes and surely_fits(requests[i], limit))]
    counted = await backend.acount_tokens([requests[i] for i in check], deadline) if check else None
    if limit is None or counted is None:
        return requests, truncated, errors
    requests = list(requests)

    async def truncated_request(i: int, count: int, budget: int) -> GenerationRequest:
        (floor,) = await backend.acount_tokens([render(_shorten(items[i], 0.0))], deadline) or [0]
        if floor > budget:
            raise ContextLengthError(
                f"item {i}: even with empty responses the judge prompt is {floor} tokens, over the {budget} "
                "that fit; the instruction, reference answer or rubric is too long for this judge",
                index=i,
                field="instruction",
            )
        fraction = 1.0
        for _ in range(_MAX_STEPS):
            fraction *= max(0.0, (budget - floor) / max(1, count - floor)) * 0.97
            request = render(_shorten(items[i], fraction))
            (count,) = await backend.acount_tokens([request], deadline) or [0]
            if count <= budget:
                return request
        raise InputError(
            f"item {i}: could not truncate the response to fit the judge context", index=i, field="response"
        )

    for i, count in zip(check, counted, strict=True):
        req = requests[i]
        budget = limit - req.sampling.max_tokens
        if budget <= 0:
            raise ContextLengthError(
                f"max_tokens={req.sampling.max_tokens} leaves no room for a prompt in the judge's "
                f"{limit}-token context; lower sampling max_tokens or raise max_model_len",
                index=i,
                field="max_tokens",
            )
        if count <= budget:
            continue
        if not truncate:
            errors[i] = ContextLengthError(
                f"item {i}: the judge prompt is {count} tokens, but the judge context is {limit} tokens and "
                f"{req.sampling.max_tokens} are reserved for the feedback (max_tokens), so at most {budget} fit; "
                "shorten the response/instruction, raise max_model_len, lower max_tokens, or pass "
                "truncate_response=True (in a reward path: the setting over_context=truncate)",
                index=i,
                field="response",
            )
            continue
        try:
            requests[i] = await truncated_request(i, count, budget)
            truncated[i] = True
        except InputError as e:
            errors[i] = e
    return requests, truncated, errors
