"""``PrometheusJudge``: absolute grades and pairwise verdicts from a Prometheus-style judge.

Every call renders the exact Prometheus prompts, validates the whole batch before
any generation, sends all items to the backend together (vLLM batches them), and
returns one ``Grade``/``Verdict`` per item, None-scored (never a made-up number)
when the judge failed.

Example (the README tour runs this on a real model):
    >>> judge = PrometheusJudge(backend="scripted", outputs=["Accurate and complete. [RESULT] 5"])
    >>> judge.grade(["What is 2+2?"], ["4"], "helpfulness")[0].score
    5.0
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from prom_reward.backends import Backend, GenerationRequest, make_backend
from prom_reward.core.combine import grade_from_run, verdict_from_runs
from prom_reward.confidence.indicators import TRUNCATIONS, mean_entropy, merge_confidences
from prom_reward.core.context import fit_to_context
from prom_reward.errors import ConfigError
from prom_reward.core.items import AbsoluteItem, RelativeItem, absolute_items, relative_items
from prom_reward.core.presets import find_preset_for_model, get_preset, resolve_model_path
from prom_reward.format.templates import ABS_SYSTEM_PROMPT, REL_SYSTEM_PROMPT
from prom_reward.format.render import render_absolute, render_relative
from prom_reward.core.results import Grade, Verdict
from prom_reward.core.sampler import Mode, SampleRunner
from prom_reward.format.sanitize import neutralize
from prom_reward.backends.sampling import SamplingConfig

if TYPE_CHECKING:
    from prom_reward.backends.store import JudgmentStore

EXPECTED_LOGPROBS = 20


@dataclass
class JudgeStats:
    """Running counters over a judge's lifetime (read them for metrics)."""

    calls: int = 0
    """Judge calls (grade/compare batches, tie rounds included)."""
    items: int = 0
    """Prompts judged (a swapped order counts as one more)."""
    samples: int = 0
    """Samples generated, retries included."""
    parse_failures: int = 0
    """Samples without a verdict."""
    retries: int = 0
    """Re-sampling rounds, summed over items."""
    forced: int = 0
    """Verdicts read by forcing `` [RESULT] ``."""
    truncated: int = 0
    """Items whose response was shortened to fit the context."""
    neutralized: int = 0
    """Template markers rewritten inside responses (see ``prom_reward.format.sanitize``)."""
    prompt_tokens: int = 0
    """Prompt tokens sent."""
    completion_tokens: int = 0
    """Tokens generated."""
    seconds: float = 0.0
    """Wall time spent in the backend loop."""
    calibration_tokens: int = 0
    """Judge-output tokens a calibration (base) model read by teacher forcing."""


def _abs_request(item: AbsoluteItem, sampling: SamplingConfig) -> GenerationRequest:
    user = render_absolute(item.instruction, item.response, item.rubric, item.reference_answer)
    return GenerationRequest(system=ABS_SYSTEM_PROMPT, user=user, sampling=sampling)


def _rel_request(item: RelativeItem, sampling: SamplingConfig) -> GenerationRequest:
    user = render_relative(item.instruction, item.response_a, item.response_b, item.rubric, item.reference_answer)
    return GenerationRequest(system=REL_SYSTEM_PROMPT, user=user, sampling=sampling)


def _apply_preset(p: Any, backend: str, model: str | None,
                  options: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Merge a preset under the user's options, as far as the chosen backend can use it."""
    if backend == "openai":
        # The server owns the weights and engine options; the client needs the wire format,
        # and the literal [INST] string can only travel through the completions endpoint.
        wire = {"wire": p.wire, **({"endpoint": "completions"} if p.wire == "inst" else {})}
        served = None if p.model.startswith("local:") else p.model
        return (model if model != p.name else served), {**wire, **options}
    engine = {"wire": p.wire, **(p.engine if backend == "vllm" else {})}
    return resolve_model_path(p.model), {**engine, **options}


class PrometheusJudge:
    """A Prometheus-style judge over any backend.

    Args:
        model: hub id, local folder, or preset name (``prometheus-7b-v2.0``, ``smollm2-135m-instruct``).
        backend: backend name (``vllm``, ``openai``, ``transformers``, ``scripted``) or a Backend object.
        preset: apply a preset explicitly (otherwise one is found from ``model``).
        sampling: options merged key by key over the paper defaults (temperature 1.0,
            top_p 0.9, repetition_penalty 1.03, max_tokens 1024), or a SamplingConfig.
        num_samples: samples per item (one request with n=k); the grade keeps all and their mean.
        max_retries: re-sampling rounds for outputs without a parseable verdict.
        force_verdict: read the verdict from the next-token distribution after appending
            `` [RESULT] `` to feedback that ended without one (one short extra request).
        expected_score: request token logprobs (top 20) so grades carry P(1..5) / P(A) and
            the expected score.
        max_tie_rounds: re-sampling rounds for ``compare_by_grades`` ties.
        truncate_response: shorten over-long responses to fit the judge context instead of raising.
        neutralize_markers: rewrite template markers (``###Feedback:``, ``[RESULT]`` ...) and chat
            special tokens inside responses so a response cannot forge sections of the judge prompt
            or end its turn (on by default; ``prom_reward.format.sanitize``).
        special_tokens: the judge's chat special tokens to neutralise, on top of the built-in list
            and the tokenizer's own (read from the backend when it has one: ``vllm``,
            ``transformers``); give them for a judge server (e.g. ``tokenizer.all_special_tokens``).
        store: a judgment store (SQLite path or ``JudgmentStore``): results are saved after each
            backend call and re-runs answer from it (see ``prom_reward.backends.store``); chunk long jobs.
        confidence: request per-token top-20 logprobs so every ``Grade``/``Verdict`` carries its
            token-entropy indicators in ``.confidence`` (SE, perplexity, verdict probability; the
            sample/swap agreements are there without it). See ``prom_reward.confidence.indicators``.
        calibration: a base model for SE-Cali: a backend object with ``continuation_logprobs``
            (``vllm``, ``openai``, ``transformers``) or a dict of ``make_backend`` options
            (``{"backend": "vllm", "model": ...}``). It reads each valid output of the judge by
            teacher forcing, in its own wire format; implies ``confidence=True``.
        entropy_truncation: how token entropies treat the mass outside the top-k: ``tail`` (the
            tightest lower bound), ``bucket`` (one extra outcome) or ``renormalize``
            (see ``prom_reward.confidence.indicators``).
        **backend_options: passed to the backend constructor (e.g. ``max_model_len``, ``base_url``).
    """

    def __init__(
        self,
        model: str | None = None,
        backend: "str | Backend" = "vllm",
        *,
        preset: str | None = None,
        sampling: "dict[str, Any] | SamplingConfig | None" = None,
        num_samples: int = 1,
        max_retries: int = 2,
        force_verdict: bool | None = None,
        expected_score: bool = False,
        max_tie_rounds: int = 5,
        truncate_response: bool = False,
        neutralize_markers: bool = True,
        special_tokens: Sequence[str] = (),
        store: "str | Path | JudgmentStore | None" = None,
        confidence: bool = False,
        calibration: "Backend | dict[str, Any] | None" = None,
        entropy_truncation: str = "tail",
        **backend_options: Any,
    ) -> None:
        p = get_preset(preset) if preset else find_preset_for_model(model)
        judge_defaults = dict(p.judge) if p else {}
        if p is not None and isinstance(backend, str):
            model, backend_options = _apply_preset(p, backend, model, backend_options)
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ConfigError(f"num_samples must be an int >= 1, got {num_samples!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if not isinstance(max_tie_rounds, int) or max_tie_rounds < 0:
            raise ConfigError(f"max_tie_rounds must be an int >= 0, got {max_tie_rounds!r}")
        if entropy_truncation not in TRUNCATIONS:
            raise ConfigError(f"entropy_truncation: expected one of {', '.join(TRUNCATIONS)}, "
                              f"got {entropy_truncation!r}")
        base = SamplingConfig().merged(judge_defaults.get("sampling"))
        self.sampling = base.merged(sampling)
        self.entropy_truncation = entropy_truncation
        self._owns_calibration = isinstance(calibration, dict)
        self.calibration = self._calibration_backend(calibration)
        self.confidence = bool(confidence or self.calibration is not None)
        if (expected_score or self.confidence) and (self.sampling.logprobs or 0) < EXPECTED_LOGPROBS:
            self.sampling = dataclasses.replace(self.sampling, logprobs=EXPECTED_LOGPROBS)
        self.num_samples = num_samples
        self.max_retries = max_retries
        self.force_verdict = bool(judge_defaults.get("force_verdict", False) if force_verdict is None else force_verdict)
        self.max_tie_rounds = max_tie_rounds
        self.truncate_response = truncate_response
        self.neutralize_markers = neutralize_markers
        if isinstance(backend, str) and backend != "scripted" and model is not None:
            backend_options = {"model": model, **backend_options}
        if store is not None:  # open (and validate) the store before starting an engine
            from prom_reward.backends.store import open_store

            store = open_store(store)
        self.backend: Backend = make_backend(backend, **backend_options)
        if store is not None:
            from prom_reward.backends.cached import CachedBackend

            self.backend = CachedBackend(self.backend, store)
        self.stats = JudgeStats()
        tokenizer = getattr(self.backend, "tokenizer", None)
        self.special_tokens: tuple[str, ...] = tuple(special_tokens) + tuple(
            getattr(tokenizer, "all_special_tokens", None) or ())
        """Chat special tokens neutralised in judged texts (besides ``sanitize.SPECIAL_TOKENS``)."""

    # -- plumbing ---------------------------------------------------------------
    @staticmethod
    def _calibration_backend(calibration: Any) -> Any:
        if calibration is None:
            return None
        from prom_reward.backends.teacher_forcing import supports_teacher_forcing

        if isinstance(calibration, dict):
            options = dict(calibration)
            calibration = make_backend(options.pop("backend", "vllm"), **options)
        if not supports_teacher_forcing(calibration):
            raise ConfigError(
                f"calibration: expected a backend that can teacher-force (vllm, openai, transformers) or a dict "
                f"of its options, got {type(calibration).__name__}, which has no continuation_logprobs"
            )
        return calibration

    def _calibrate(self, requests: list[GenerationRequest], runs: list[Any]) -> None:
        """Base-model entropy of every valid sample's text, in one teacher-forcing call."""
        where = [(i, j) for i, r in enumerate(runs) for j, smp in enumerate(r.samples)
                 if smp.verdict is not None and smp.text]
        if not where:
            return
        scored = self.calibration.continuation_logprobs(
            [requests[i] for i, _ in where], [runs[i].samples[j].text for i, j in where],
            top_k=self.sampling.logprobs or EXPECTED_LOGPROBS)
        for (i, j), positions in zip(where, scored):
            runs[i].samples[j] = dataclasses.replace(
                runs[i].samples[j], base_entropy=mean_entropy(positions, self.entropy_truncation))
            self.stats.calibration_tokens += len(positions)

    def _neutralize(self, items: list[Any]) -> list[Any]:
        if not self.neutralize_markers:
            return items
        out = []
        for it in items:
            changes = {}
            for f in ("response", "response_a", "response_b"):
                if hasattr(it, f):
                    changes[f], n = neutralize(getattr(it, f), self.special_tokens)
                    self.stats.neutralized += n
            out.append(dataclasses.replace(it, **changes))
        return out

    def _sampling(self, overrides: "dict[str, Any] | SamplingConfig | None") -> SamplingConfig:
        return self.sampling.merged(overrides)

    def _run(self, requests: list[GenerationRequest], mode: Mode, k: int, items: list[Any],
             render: Callable[[Any], GenerationRequest],
             truncate: bool | None = None) -> tuple[list[Any], list[bool], list[Any]]:
        requests, items, truncated = fit_to_context(self.backend, requests, items, render,
                                                    self.truncate_response if truncate is None else truncate)
        start = time.perf_counter()
        runs = SampleRunner(self.backend, max_retries=self.max_retries, force_verdict=self.force_verdict,
                            truncation=self.entropy_truncation).run(requests, mode, k)
        if self.calibration is not None:
            self._calibrate(requests, runs)
        s = self.stats
        s.calls += 1
        s.items += len(runs)
        s.seconds += time.perf_counter() - start
        s.truncated += sum(truncated)
        for r in runs:
            s.samples += len(r.samples)
            s.parse_failures += r.failures
            s.retries += r.retries
            s.forced += r.forced
            s.prompt_tokens += r.prompt_tokens
            s.completion_tokens += r.completion_tokens
        return runs, truncated, items

    # -- public API ---------------------------------------------------------------
    def grade(self, instructions: Sequence[str], responses: Sequence[str], rubric: Any,
              reference_answers: Sequence[str | None] | None = None, *, num_samples: int | None = None,
              sampling: "dict[str, Any] | SamplingConfig | None" = None, truncate_response: bool | None = None,
              _attempt: int = 0) -> list[Grade]:
        """Absolute grades (1..5) for each (instruction, response); ``rubric`` is one rubric
        (name, Rubric, dict, file) for all items or a list with one per item. ``truncate_response``
        overrides the judge's setting for this call. (``_attempt`` numbers internal re-gradings such
        as tie rounds, so a judgment store keeps them apart.)"""
        items = self._neutralize(absolute_items(instructions, responses, rubric, reference_answers))
        if not items:
            return []
        cfg = self._sampling(sampling)
        render = lambda it: dataclasses.replace(_abs_request(it, cfg), attempt=_attempt)  # noqa: E731
        runs, truncated, _ = self._run([render(it) for it in items], "absolute", num_samples or self.num_samples,
                                       items, render, truncate_response)
        return [grade_from_run(r, truncated=t) for r, t in zip(runs, truncated)]

    def compare(self, instructions: Sequence[str], responses_a: Sequence[str], responses_b: Sequence[str],
                rubric: Any, reference_answers: Sequence[str | None] | None = None, *, swap: bool = False,
                num_samples: int | None = None, sampling: "dict[str, Any] | SamplingConfig | None" = None,
                truncate_response: bool | None = None) -> list[Verdict]:
        """Pairwise verdicts ("A"/"B"); with ``swap=True`` both orders are judged in the same batch
        and combined (agreement, else a tie with winner None). ``truncate_response`` overrides the
        judge's setting for this call."""
        items = self._neutralize(relative_items(instructions, responses_a, responses_b, rubric, reference_answers))
        if not items:
            return []
        cfg = self._sampling(sampling)
        render = lambda it: _rel_request(it, cfg)  # noqa: E731
        batch = list(items)
        if swap:
            batch += [dataclasses.replace(it, response_a=it.response_b, response_b=it.response_a) for it in items]
        runs, truncated, _ = self._run([render(it) for it in batch], "relative", num_samples or self.num_samples,
                                       batch, render, truncate_response)
        n = len(items)
        return [dataclasses.replace(verdict_from_runs(runs[i], runs[n + i] if swap else None),
                                    truncated=truncated[i] or (swap and truncated[n + i]))
                for i in range(n)]

    def compare_by_grades(self, instructions: Sequence[str], responses_a: Sequence[str],
                          responses_b: Sequence[str], rubric: Any,
                          reference_answers: Sequence[str | None] | None = None, *,
                          max_tie_rounds: int | None = None, num_samples: int | None = None) -> list[Verdict]:
        """Pairwise verdicts through absolute grades (the papers' Direct2Pair). Tied pairs are
        re-graded at temperature 1.0 until one wins or ``max_tie_rounds`` is reached."""
        items = relative_items(instructions, responses_a, responses_b, rubric, reference_answers)
        absolute_items(instructions, responses_a, rubric, reference_answers)  # needs score descriptions
        if not items:
            return []
        rounds_cap = self.max_tie_rounds if max_tie_rounds is None else max_tie_rounds
        ins = [it.instruction for it in items]
        rubs = [it.rubric for it in items]
        refs = [it.reference_answer for it in items]
        both = self.grade(ins + ins, [it.response_a for it in items] + [it.response_b for it in items],
                          rubs + rubs, refs + refs, num_samples=num_samples)
        n = len(items)
        grades = [(both[i], both[n + i]) for i in range(n)]
        rounds = [0] * n

        def tied(i: int) -> bool:
            a, b = grades[i]
            return a.ok and b.ok and a.score == b.score

        for tie_round in range(1, rounds_cap + 1):
            todo = [i for i in range(n) if tied(i)]
            if not todo:
                break
            re = self.grade([ins[i] for i in todo] * 2,
                            [items[i].response_a for i in todo] + [items[i].response_b for i in todo],
                            [rubs[i] for i in todo] * 2, [refs[i] for i in todo] * 2,
                            num_samples=num_samples, sampling={"temperature": 1.0},
                            _attempt=1000 * tie_round)
            for j, i in enumerate(todo):
                grades[i] = (re[j], re[len(todo) + j])
                rounds[i] += 1
        out = []
        for i, (a, b) in enumerate(grades):
            winner = None
            if a.ok and b.ok and a.score != b.score:
                winner = "A" if a.score > b.score else "B"  # type: ignore[operator]
            out.append(Verdict(
                winner=winner, feedback=a.feedback, samples=a.samples + b.samples,
                tie=tied(i), order_winners=(winner,), grades=(a, b), tie_rounds=rounds[i],
                retries=a.retries + b.retries, failures=a.failures + b.failures, forced=a.forced + b.forced,
                prompt_tokens=a.prompt_tokens + b.prompt_tokens,
                completion_tokens=a.completion_tokens + b.completion_tokens,
                confidence=merge_confidences([a.confidence, b.confidence]),
            ))
        return out

    def close(self) -> None:
        """Release the backend (the vLLM engine, HTTP clients); a calibration model stays the caller's
        unless it was built here from a dict."""
        self.backend.close()
        if self._owns_calibration and self.calibration is not None:
            self.calibration.close()

    def __enter__(self) -> "PrometheusJudge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
