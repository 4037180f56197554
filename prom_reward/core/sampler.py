"""The sampling loop behind every judgment: one batched backend call, parse, force verdicts (``FORCE_POLICIES``),
re-sample up to ``max_retries`` rounds (docs/design-notes.md); verdict distributions (``verdict_distribution``)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal, Protocol, get_args

from prom_reward.backends.base import Backend, Completion, GenerationRequest, GenerationResult, TokenLogprobs
from prom_reward.confidence.indicators import mean_entropy, mean_nll
from prom_reward.core.results import JudgeFailure, JudgeSample, JudgeStats
from prom_reward.errors import BackendError, ConfigError
from prom_reward.format.judge_format import DEFAULT_FORMAT, JudgeFormat, Task, get_judge_format

EXPECTED_LOGPROBS = 20  # the top logprobs asked where verdict probabilities are read (forcing, expected scores)
ForcePolicy = Literal["never", "cut", "always"]
FORCE_POLICIES: tuple[str, ...] = get_args(ForcePolicy)
"""When a verdict is forced: ``never``; ``cut``, outputs cut at ``max_tokens``; ``always``."""
DEFAULT_FORCE_POLICY: ForcePolicy = "cut"  # the policy of a judge whose preset and user name none
CUT_FINISH_REASONS = frozenset({"length"})  # an output stopped by its token budget (vLLM, servers, transformers)

_SPACE_MARKS = " \t\n\r\u2581\u0120\u010a"  # space, SentencePiece '▁', GPT-2 'Ġ' and 'Ċ'


def normalize_token(token: str) -> str:
    """Token text without surrounding whitespace or space marks."""
    return token.strip(_SPACE_MARKS)


def distribution_at(position: TokenLogprobs, labels: Sequence[str]) -> tuple[dict[str, float] | None, float]:
    """(renormalised distribution over ``labels`` at one position, raw mass of labels); (None, 0.0) when no label
    is among the position's top-k tokens."""
    mass: dict[str, float] = {}
    candidates = dict(position.top)
    candidates.setdefault(position.token, position.logprob)
    for token, logprob in candidates.items():
        label = normalize_token(token)
        if label in labels and logprob is not None and math.isfinite(logprob):
            mass[label] = mass.get(label, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None, 0.0
    return {k: v / total for k, v in sorted(mass.items())}, total


def token_index_at_char(logprobs: Sequence[TokenLogprobs], text: str, char_index: int) -> int | None:
    """Index of the generated token covering ``text[char_index]``, or None."""
    pieces = [p.token for p in logprobs]
    if "".join(pieces) == text:  # the tokens spell the text: the one whose characters hold ``char_index``
        ends = list(itertools.accumulate(map(len, pieces)))
        return next((i for i, end in enumerate(ends) if end - len(pieces[i]) <= char_index < end), None)
    want = text[char_index] if 0 <= char_index < len(text) else None  # else the last token that is that character
    return next((i for i in reversed(range(len(pieces))) if normalize_token(pieces[i]) == want), None)


def verdict_distribution(
    logprobs: Sequence[TokenLogprobs] | None, text: str, verdict_start: int | None, labels: Sequence[str]
) -> tuple[dict[str, float] | None, float | None]:
    """Distribution over ``labels`` at the token that carried the parsed verdict."""
    index = token_index_at_char(logprobs, text, verdict_start) if logprobs and verdict_start is not None else None
    if logprobs is None or index is None:
        return None, None
    probs, mass = distribution_at(logprobs[index], labels)
    return probs, (mass if probs is not None else None)


def first_verdict_distribution(
    logprobs: Sequence[TokenLogprobs] | None, labels: Sequence[str], lookahead: int = 3
) -> tuple[dict[str, float] | None, float | None]:
    """For a forced verdict: the first of the next ``lookahead`` positions whose top-k holds a label."""
    for position in (logprobs or [])[:lookahead]:
        probs, mass = distribution_at(position, labels)
        if probs is not None:
            return probs, mass
        if normalize_token(position.token) not in ("", "(", "[", '"', ":"):
            break
    return None, None


EXPECTED_FIX = (
    "fix: a judge server or engine that returns logprobs (vLLM serves up to 20 with --max-logprobs 20 or more; the "
    "judge asks for 20), or score the verdicts themselves (score='mean'; prom-reward grade without --expected)"
)
NO_LOGPROBS = "the judge returned no logprobs for the verdict token"  # how no_expected begins without any


def no_logprobs(reason: str | None) -> bool:
    """Whether ``reason`` (a ``Grade.expected_reason``) says the judge returned no logprobs at all."""
    return reason is not None and reason.startswith(NO_LOGPROBS)


def no_expected(scored_tokens: int) -> str:
    """Why a verdict has no expected score, ``scored_tokens`` its samples' tokens with logprobs: none returned, or
    none of the verdict labels among the verdict token's top ones."""
    if scored_tokens == 0:
        return f"{NO_LOGPROBS}, so there is no expected score; {EXPECTED_FIX}"
    return (
        "the judge's top logprobs at the verdict token hold none of the verdict labels, so there is no expected "
        f"score; {EXPECTED_FIX}"
    )


def expected_value(probs: dict[str, float] | None) -> float | None:
    """Sum of k * P(k) for numeric labels."""
    return sum(int(k) * p for k, p in probs.items()) if probs else None


def _by_verdict(probs: dict[str, float] | None, labels: tuple[str, ...], mode: Task) -> dict[str, float] | None:
    """``probs`` keyed by the verdicts the format's labels stand for (a pairwise i-th label is A, B)."""
    if probs is None or mode == "absolute":
        return probs
    verdicts = dict(zip(labels, ("A", "B"), strict=True))
    return {verdicts[label]: p for label, p in probs.items()}


@dataclass
class ItemRun:
    """Everything sampled for one prompt."""

    samples: list[JudgeSample] = field(default_factory=list)
    retries: int = 0
    prompt_tokens: int = 0
    stored_samples: int = 0  # of samples, prompt and completion tokens: what a judgment store answered
    stored_prompt_tokens: int = 0
    stored_completion_tokens: int = 0
    error: JudgeFailure | None = None  # why the prompt was not (fully) judged: its input, or the transport

    @property
    def valid(self) -> list[JudgeSample]:
        return [s for s in self.samples if s.verdict is not None]

    @property
    def failures(self) -> int:
        return sum(1 for s in self.samples if s.verdict is None)

    @property
    def forced(self) -> int:
        return sum(1 for s in self.valid if s.forced)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.samples)


class SampleReader(Protocol):
    """What reads a judge batch's outputs once sampled and may annotate them (``PrometheusJudge(readers=...)``,
    closed with the judge), e.g. SE-Cali's base model setting ``JudgeSample.base_entropy``."""

    async def read(self, requests: Sequence[GenerationRequest], runs: list[ItemRun]) -> None:
        """Read ``runs`` (one per request, in order) and annotate them."""
        ...

    def close(self) -> None:
        """Release what the reader built (an engine of its own)."""
        ...


def count_runs(stats: JudgeStats, runs: Sequence[ItemRun], seconds: float, truncated: int) -> None:
    """Add one judge call's sampled runs to a judge's running ``stats``."""
    stats.calls += 1
    stats.items += len(runs)
    stats.seconds += seconds
    stats.truncated += truncated
    for r in runs:  # what a judgment store answered is counted apart from what was generated
        stats.samples += len(r.samples) - r.stored_samples
        stats.stored_samples += r.stored_samples
        stats.parse_failures += r.failures
        stats.retries += r.retries
        stats.forced += r.forced
        stats.prompt_tokens += r.prompt_tokens - r.stored_prompt_tokens
        stats.stored_prompt_tokens += r.stored_prompt_tokens
        stats.completion_tokens += r.completion_tokens - r.stored_completion_tokens
        stats.stored_completion_tokens += r.stored_completion_tokens


def check_counts(**counts: tuple[int, int]) -> None:
    """``ConfigError`` for a count that is not an int at least its floor: ``name=(value, floor)``."""
    for name, (value, floor) in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < floor:
            raise ConfigError(f"expected an int >= {floor}, got {value!r}; fix: give an int >= {floor}", name)


def check_force_policy(policy: object) -> ForcePolicy:
    """``policy`` when it is one of ``FORCE_POLICIES``; else a ConfigError listing them."""
    if isinstance(policy, str) and policy in FORCE_POLICIES:
        return policy  # type: ignore[return-value]
    hint = " (True is now 'always', False 'never')" if isinstance(policy, bool) else ""
    raise ConfigError(
        f"expected one of {', '.join(FORCE_POLICIES)}, got {policy!r}{hint}; fix: give one of them", "force_verdict"
    )


def forced_text(judge_format: JudgeFormat, text: str) -> str | None:
    """The assistant text to continue from when forcing a verdict after ``text``; None: not to be forced."""
    body = judge_format.forcing_body(text) if judge_format.force_prefix is not None else None
    return None if body is None else body + (judge_format.force_prefix or "")


def should_force(sample: JudgeSample, policy: ForcePolicy, judge_format: JudgeFormat) -> bool:
    """True when ``sample`` has no verdict, ends without one, and ``policy`` forces such an output."""
    if sample.verdict is not None or policy == "never" or forced_text(judge_format, sample.text) is None:
        return False
    return policy == "always" or sample.finish_reason in CUT_FINISH_REASONS


async def _generate(backend: Backend, batch: list[GenerationRequest]) -> list[GenerationResult]:
    """``backend.agenerate(batch)``, one result per request (a call failed whole: each request its error)."""
    try:
        results = await backend.agenerate(batch)
    except BackendError as e:
        return [GenerationResult((), error=str(e)) for _ in batch]
    if len(results) != len(batch):
        raise BackendError(
            f"backend {backend.name!r} returned {len(results)} results for "
            f"{len(batch)} requests; a backend must return one result per request, in order"
        )
    return results


def failure_of(result: GenerationResult) -> JudgeFailure | None:
    """The failure a failed request's result stands for (None when it was answered)."""
    if result.error is None:
        return None
    if result.rejected:
        return JudgeFailure("input", f"the judge server rejected the sample: {result.error}")
    return JudgeFailure("transport", result.error)


@dataclass
class SampleRunner:
    """Runs the loop above against one backend."""

    backend: Backend
    _: KW_ONLY
    max_retries: int = 2
    force_verdict: ForcePolicy = DEFAULT_FORCE_POLICY
    truncation: str = "tail"
    judge_format: str | JudgeFormat = DEFAULT_FORMAT

    def __post_init__(self) -> None:
        self.format = get_judge_format(self.judge_format)
        self.force_verdict = check_force_policy(self.force_verdict)

    def _parse(self, c: Completion, mode: Task) -> JudgeSample:
        parsed = self.format.parse(c.text, mode)
        probs = mass = entropy = nll = None
        if c.logprobs:  # (without them there is no distribution to read)
            labels = self.format.verdict_labels(mode)
            probs, mass = verdict_distribution(c.logprobs, c.text, parsed.verdict_start, labels)
            probs = _by_verdict(probs, labels, mode)
            entropy, nll = mean_entropy(c.logprobs, self.truncation), mean_nll(c.logprobs)
        return JudgeSample(
            text=c.text,
            feedback=parsed.feedback or None,
            verdict=parsed.verdict,
            probabilities=probs,
            verdict_mass=mass,
            finish_reason=c.finish_reason,
            completion_tokens=c.completion_tokens,
            entropy=entropy,
            nll=nll,
            scored_tokens=len(c.logprobs or ()),
            reason=parsed.reason,
        )

    async def _force(
        self, requests: list[GenerationRequest], samples: list[JudgeSample], mode: Task
    ) -> tuple[list[JudgeSample], list[int]]:
        """The samples with their verdicts forced, and per sample the forcing tokens a store answered."""
        texts = [forced_text(self.format, s.text) or "" for s in samples]  # should_force: never None here
        forcing = [
            dataclasses.replace(
                r,
                n=1,
                assistant_prefix=r.assistant_prefix + text,
                sampling=dataclasses.replace(r.sampling, max_tokens=3, logprobs=EXPECTED_LOGPROBS, stop=()),
            )
            for r, text in zip(requests, texts, strict=True)
        ]
        results = await _generate(self.backend, forcing)
        stored = [res.completions[0].completion_tokens if res.stored else 0 for res in results]
        return [self._forced(s, text, res, mode) for s, text, res in zip(samples, texts, results, strict=True)], stored

    def _forced(self, s: JudgeSample, text: str, res: GenerationResult, mode: Task) -> JudgeSample:
        """``s`` with the verdict its forcing request after ``text`` read (``res``), if any. Its feedback: what the
        parser reads in ``text + label + force_suffix``, else ``text`` without ``force_prefix`` (a format whose
        closing is not declared)."""
        if res.error is not None or not res.completions:  # not forced: the sample stays without a verdict
            return s
        c, labels = res.completions[0], self.format.verdict_labels(mode)
        label_probs, mass = first_verdict_distribution(c.logprobs, labels)
        tokens = s.completion_tokens + c.completion_tokens
        if label_probs is None:
            return dataclasses.replace(s, completion_tokens=tokens)
        label = max(label_probs, key=lambda k: label_probs[k])
        parsed = self.format.parse(text + label + self.format.force_suffix, mode)
        body = text[: len(text) - len(self.format.force_prefix or "")]
        return dataclasses.replace(
            s,
            verdict=int(label) if mode == "absolute" else ("A", "B")[labels.index(label)],
            feedback=(parsed.feedback if parsed.verdict is not None else body.strip()) or None,
            probabilities=_by_verdict(label_probs, labels, mode),
            verdict_mass=mass,
            forced=True,
            completion_tokens=tokens,
            reason=None,
        )

    @classmethod
    def first_round(cls, requests: Sequence[GenerationRequest], k: int) -> list[GenerationRequest]:
        """The requests of ``run``'s first backend call for ``requests`` (``k`` samples each)."""
        return [cls._round_request(r, k, 0, i) for i, r in enumerate(requests)]

    @staticmethod
    def _round_request(r: GenerationRequest, need: int, round_: int, index: int) -> GenerationRequest:
        s = r.sampling
        if round_ > 0:
            # Greedy retries would repeat the same unparseable output; a seeded one, the same output again.
            temperature = 1.0 if s.temperature == 0 else s.temperature
            seed = None if s.seed is None else (s.seed + 7919 * round_ + 104729 * index) % (2**31)
            if s.temperature == 0 or s.seed is not None:
                s = dataclasses.replace(s, temperature=temperature, seed=seed)
        elif need == r.n:  # the first round of a request as built
            return r
        return dataclasses.replace(r, n=need, sampling=s, attempt=r.attempt + round_)

    async def run(self, requests: Sequence[GenerationRequest], mode: Task, k: int = 1) -> list[ItemRun]:
        """Sample until each request has ``k`` valid samples or retries run out."""
        runs = [ItemRun() for _ in requests]
        pending = {i: k for i in range(len(requests))}
        round_ = 0
        while pending:
            idx = list(pending)
            batch = [self._round_request(requests[i], pending[i], round_, i) for i in idx]
            results = await _generate(self.backend, batch)
            new: list[tuple[int, JudgeSample]] = []
            for i, res in zip(idx, results, strict=True):
                runs[i].error = failure_of(res)
                runs[i].prompt_tokens += res.prompt_tokens
                new.extend((i, self._parse(c, mode)) for c in res.completions)
                if res.stored:
                    runs[i].stored_samples += len(res.completions)
                    runs[i].stored_prompt_tokens += res.prompt_tokens
                    runs[i].stored_completion_tokens += sum(c.completion_tokens for c in res.completions)
            todo = [j for j, (_, s) in enumerate(new) if should_force(s, self.force_verdict, self.format)]
            if todo:
                forced, stored = await self._force([requests[new[j][0]] for j in todo], [new[j][1] for j in todo], mode)
                for j, s, tokens in zip(todo, forced, stored, strict=True):
                    new[j] = (new[j][0], s)
                    runs[new[j][0]].stored_completion_tokens += tokens
            for i, s in new:
                runs[i].samples.append(s)
            short = [i for i in idx if runs[i].error is None and len(runs[i].valid) < k]  # a failed request: not again
            pending = {i: k - len(runs[i].valid) for i in short} if round_ < self.max_retries else {}
            for i in pending:
                runs[i].retries += 1
            round_ += 1
        return runs
