"""``PrometheusJudge``: absolute grades and pairwise verdicts from a Prometheus-style judge over any backend, and
its requests in the judge format (``judge_request``, ``force_policy``), fitted to its context (``fit_to_context``).

Example:
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Accurate and complete. [RESULT] 5"])
    >>> judge.grade(["What is 2+2?"], ["4"], "helpfulness")[0].score
    5.0
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from prom_reward.backends import Backend, CachedBackend, GenerationRequest, make_backend
from prom_reward.backends.sampling import SamplingConfig, SamplingOverrides
from prom_reward.confidence.indicators import check_truncation
from prom_reward.core.combine import grade_from_run, verdict_from_runs
from prom_reward.core.items import GradeItem, Item, PairItem, map_responses
from prom_reward.core.presets import apply_preset, find_preset_for_model, get_preset
from prom_reward.core.protocol import CallOptions, Judge, JudgeCapabilities
from prom_reward.core.results import Grade, JudgeStats, Verdict, input_failure
from prom_reward.core.sampler import (
    DEFAULT_FORCE_POLICY,
    EXPECTED_LOGPROBS,
    ForcePolicy,
    ItemRun,
    SampleReader,
    SampleRunner,
    check_counts,
    check_force_policy,
    count_runs,
)
from prom_reward.errors import ConfigError, ContextLengthError, InputError, PromRewardError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, Task, get_judge_format
from prom_reward.format.sanitize import neutralize

if TYPE_CHECKING:
    from prom_reward.backends.store import JudgmentStore

_MAX_STEPS = 8
TEMPLATE_MARGIN = 256  # tokens a chat template may add around the text (role headers, BOS ...)


def surely_fits(request: GenerationRequest, limit: int) -> bool:
    """True when the request fits ``limit`` whatever the tokenizer, given at most one token per byte."""
    texts = (request.system, request.user, request.assistant_prefix)
    size = sum(len(t) if t.isascii() else len(t.encode()) for t in texts)
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


def asks_expected(judge: Judge, sampling: SamplingOverrides = None) -> bool:
    """Whether ``judge``'s calls (with ``sampling`` over its own) ask for the verdict's logprobs."""
    return (judge.sampling.merged(sampling).logprobs or 0) >= EXPECTED_LOGPROBS


def judge_request(
    item: Item, sampling: SamplingConfig, judge_format: str | JudgeFormat = DEFAULT_FORMAT, attempt: int = 0
) -> GenerationRequest:
    """The judge's request for one item (a ``GradeItem`` or a ``PairItem``): the format's system and user messages."""
    fmt, ref = get_judge_format(judge_format), item.reference_answer
    if isinstance(item, GradeItem):
        prompt = fmt.absolute_prompt(item.instruction, item.response, item.rubric, ref)
    else:
        prompt = fmt.relative_prompt(item.instruction, item.response_a, item.response_b, item.rubric, ref)
    return GenerationRequest(prompt.system, prompt.user, sampling, attempt=attempt, judge_format=fmt.name)


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


class PrometheusJudge(Judge):
    """A Prometheus-style judge over any backend (a run's ``JudgeSpec`` builds one: ``spec.build()``).

    Args:
        model: hub id, local folder, or preset name (``prometheus-7b-v2.0``, ``smollm2-135m-instruct``).
        backend: ``vllm``, ``openai``, ``transformers``, ``scripted``, or a Backend object.
        preset: apply a preset explicitly (otherwise one is found from ``model``).
        sampling: options merged key by key over the paper defaults (temperature 1.0, top_p 0.9,
            repetition_penalty 1.03, max_tokens 1024), or a SamplingConfig.
        num_samples: samples per item (one request with n=k); the grade keeps all and their mean.
        max_retries: re-sampling rounds for outputs without a parseable verdict.
        force_verdict: when to read a verdict the judge did not write from its next-token distribution after
            `` [RESULT] ``: ``cut`` (outputs cut at ``max_tokens``), ``always`` or ``never``; None: the preset's.
        expected_score: request token logprobs (top 20): grades carry P(1..5) / P(A) and the expected score.
        max_tie_rounds: re-sampling rounds for ``compare_by_grades`` ties.
        truncate_response: shorten over-long responses to fit the judge context instead of failing them.
        neutralize_markers: rewrite template markers and chat special tokens in responses, so none forges the prompt.
        special_tokens: chat special tokens to neutralise besides the built-in list and the tokenizer's.
        store: a judgment store (SQLite path or ``JudgmentStore``) that saves results and answers re-runs.
        confidence: request top-20 logprobs so results carry token-entropy indicators in ``.confidence``.
        readers: ``core.sampler.SampleReader``s awaited on each batch's outputs, closed with the judge (SE-Cali).
        format: the judge format: a registered name or a ``JudgeFormat``; None: the preset's, else ``prometheus2``.
        entropy_truncation: the mass outside the top-k in token entropies: ``tail``, ``bucket`` or ``renormalize``.
        **backend_options: passed to the backend constructor (e.g. ``max_model_len``, ``base_url``, ``api_key``).
    """

    def __init__(
        self,
        model: str | None = None,
        backend: str | Backend = "vllm",
        *,
        preset: str | None = None,
        sampling: SamplingOverrides = None,
        num_samples: int = 1,
        max_retries: int = 2,
        force_verdict: ForcePolicy | None = None,
        expected_score: bool = False,
        max_tie_rounds: int = 5,
        truncate_response: bool = False,
        neutralize_markers: bool = True,
        special_tokens: Sequence[str] = (),
        store: str | Path | JudgmentStore | None = None,
        confidence: bool = False,
        readers: Sequence[SampleReader] = (),
        entropy_truncation: str = "tail",
        format: str | JudgeFormat | None = None,
        **backend_options: Any,
    ) -> None:
        p = get_preset(preset) if preset else find_preset_for_model(model)
        judge_defaults = dict(p.judge) if p else {}
        self.format: JudgeFormat = get_judge_format(format or (p.format if p else DEFAULT_FORMAT))
        fmt, force = self.format, judge_defaults.get("force_verdict", DEFAULT_FORCE_POLICY)
        self.force_verdict = force_policy(fmt, expected_score=expected_score, asked=force_verdict, default=force)
        if p is not None and isinstance(backend, str):
            model, backend_options = apply_preset(p, backend, model, backend_options)
        check_counts(num_samples=(num_samples, 1), max_retries=(max_retries, 0), max_tie_rounds=(max_tie_rounds, 0))
        base = SamplingConfig().merged(judge_defaults.get("sampling"))
        self.sampling = base.merged(sampling)
        self.entropy_truncation = check_truncation(entropy_truncation, "entropy_truncation")
        self.readers: tuple[SampleReader, ...] = tuple(readers)
        if (expected_score or confidence) and (self.sampling.logprobs or 0) < EXPECTED_LOGPROBS:
            self.sampling = dataclasses.replace(self.sampling, logprobs=EXPECTED_LOGPROBS)
        self.max_retries = max_retries
        self.truncate_response = truncate_response
        if isinstance(backend, str) and backend != "scripted" and model is not None:
            backend_options = {"model": model, **backend_options}
        if store is not None:  # the store opened (and checked) first; an in-process engine starts on its first miss
            backend, backend_options = CachedBackend.deferred(backend, backend_options, store), {}
        self.backend: Backend = make_backend(backend, **backend_options)
        self._store = self.backend if isinstance(self.backend, CachedBackend) else None  # the backend, as a store
        self.stats = JudgeStats()
        self.capabilities = JudgeCapabilities(
            num_samples=num_samples,
            max_tie_rounds=max_tie_rounds,
            confidence=confidence,
            neutralize_markers=neutralize_markers,
            special_tokens=tuple(special_tokens) + self.backend.special_tokens(),  # given, then the tokenizer's
            thread_safe=self.backend.capabilities.thread_safe,
        )

    def _neutralize(self, items: list[Item]) -> list[Item]:
        """``items`` with template markers inside their responses rewritten (counted in ``stats.neutralized``)."""
        if not self.capabilities.neutralize_markers:
            return items

        def neutral(text: str) -> str:
            out, n = neutralize(text, self.capabilities.special_tokens, self.format.markers)
            self.stats.neutralized += n
            return out

        return [map_responses(it, neutral) for it in items]

    async def _run(
        self, mode: Task, items: list[Item], failed: dict[int, InputError], options: CallOptions
    ) -> tuple[list[ItemRun], list[bool]]:
        """One run per item, in order: the items not in ``failed`` rendered in the judge's format, fitted to the
        context (not those a judgment store answers), sampled, read by the ``readers``, counted."""
        cfg, attempt = self.sampling.merged(options.get("sampling")), options.get("attempt", 0)
        render = functools.partial(judge_request, sampling=cfg, judge_format=self.format, attempt=attempt)
        k = options.get("num_samples") or self.capabilities.num_samples
        truncate, deadline = options.get("truncate_response"), options.get("deadline")
        truncate = self.truncate_response if truncate is None else truncate
        runs = {i: ItemRun(error=input_failure(e)) for i, e in failed.items()}  # the others: once sampled
        truncated = [False] * len(items)
        ok = [i for i in range(len(items)) if i not in failed]
        rendered = [render(items[i]) for i in ok]
        known = None  # which requests a judgment store answers (not checked against the context)
        if self._store is not None and rendered:
            await self._store.aname_model(deadline)  # keyed by the model a server serves, before the store is asked
            known = self._store.stored(SampleRunner.first_round(rendered, k))
        oks = [items[i] for i in ok]
        fitted, cut, errors = await fit_to_context(self.backend, rendered, oks, render, truncate, known, deadline)
        go, requests = [], []
        for i, request, was_cut, error in zip(ok, fitted, cut, errors, strict=True):
            truncated[i] = was_cut
            if error is not None:
                runs[i] = ItemRun(error=input_failure(error))
            else:
                go.append(i)
                same = request.deadline == deadline
                requests.append(request if same else dataclasses.replace(request, deadline=deadline))
        start = time.perf_counter()
        sampled = await SampleRunner(
            self.backend,
            max_retries=self.max_retries,
            force_verdict=self.force_verdict,
            truncation=self.entropy_truncation,
            judge_format=self.format,
        ).run(requests, mode, k)
        runs.update(zip(go, sampled, strict=True))
        for reader in self.readers:
            await reader.read(requests, sampled)
        count_runs(self.stats, sampled, time.perf_counter() - start, sum(truncated))
        return [runs[i] for i in range(len(items))], truncated

    async def agrade_items(self, items: Sequence[GradeItem], **options: Unpack[CallOptions]) -> list[Grade]:
        """Absolute grades of ``items``, one per item, in order (a failed one: score None and its ``error``)."""
        batch, failed = self._checked(items, GradeItem, "absolute")
        if not batch:
            return []
        runs, truncated = await self._run("absolute", self._neutralize(batch), failed, options)
        return [grade_from_run(r, truncated=t) for r, t in zip(runs, truncated, strict=True)]

    async def acompare_items(
        self, items: Sequence[PairItem], *, swap: bool = False, **options: Unpack[CallOptions]
    ) -> list[Verdict]:
        """Pairwise verdicts ("A"/"B") of ``items``, one per item, in order; ``swap``: both orders in one batch."""
        pairs, failed = self._checked(items, PairItem, "relative")
        if not pairs:
            return []
        batch, n = self._neutralize(pairs), len(pairs)
        if swap:  # the swapped orders follow the originals in the same batch
            batch += [dataclasses.replace(it, response_a=it.response_b, response_b=it.response_a) for it in batch[:n]]
            failed = {**failed, **{n + i: e for i, e in failed.items()}}
        runs, truncated = await self._run("relative", batch, failed, options)
        swapped = runs[n:] if swap else [None] * n  # truncated[i::n]: the item's orders
        return [verdict_from_runs(runs[i], swapped[i], truncated=any(truncated[i::n])) for i in range(n)]

    def __getstate__(self) -> dict[str, Any]:
        if self.backend.name == "vllm":  # TRL's async GRPO pickles rewards into a child process
            raise PromRewardError(
                "this judge holds an in-process vLLM engine, which cannot be pickled (TRL's async GRPO runs reward "
                "functions in a child process); pass judge=dict(model=..., ...) so each process builds its own judge, "
                "or use judge servers: dict(backend='openai', base_url=[...])"
            )
        return dict(self.__dict__)

    def close(self) -> None:
        """Release the backend (the vLLM engine, HTTP clients) and the ``readers``."""
        self.backend.close()
        for reader in self.readers:
            reader.close()
