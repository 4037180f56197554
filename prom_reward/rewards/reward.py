"""``PrometheusReward``: a judge as a reward function for TRL's online trainers (``GRPOTrainer``/``RLOOTrainer``):
one float per completion, or None where the judge failed; ``AsyncPrometheusReward`` is the form TRL awaits."""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from prom_reward.backends.base import JudgeServer
from prom_reward.backends.bridge import sync_method
from prom_reward.backends.cached import CachedBackend
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.backends.sampling import SamplingOverrides
from prom_reward.checklist.criteria import parse_checklist
from prom_reward.core.items import check_text
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.core.protocol import Judge
from prom_reward.core.results import input_failure
from prom_reward.errors import ConfigError, InputError
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.format.judge_format import DEFAULT_FORMAT, JUDGE_FORMATS, Task, unsupported_task
from prom_reward.format.rubrics import RubricResolver
from prom_reward.format.sanitize import neutralize
from prom_reward.rewards.config import RewardConfig, get_judge_format_setting, reward_config
from prom_reward.rewards.diagnostics import control_length, diagnostics, top_of_scale
from prom_reward.rewards.modes import CHECKLIST_MODES, ModeOutput, assemble, batch_runner
from prom_reward.rewards.outage import JudgeHealth, ajudge_until_answered
from prom_reward.rewards.samples import SAMPLE_COLUMNS, RewardSample, response_text, samples_from_columns
from prom_reward.rewards.startup import CanaryGate, canary_rubric, judge_canary

_NO_VERDICT = "the judge gave no parseable verdict after its retries"


TRL_ROLLOUT_CHILD = "grpo-rollout-worker-child"
"""The process name TRL 1.16's ``AsyncRolloutWorker`` gives its spawned child (run with ``CUDA_VISIBLE_DEVICES=""``)."""


def log_to_trl(name: str, kwargs: dict[str, Any], metrics: dict[str, float], extra: dict[str, list]) -> None:
    """Log through TRL's callbacks where ``kwargs`` holds them: each metric as ``name/key`` (NaN left out: e.g. no
    swap agreement to report) by ``log_metric``, each non-empty list of ``extra`` as ``name_key`` by ``log_extra``."""
    log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
    log_extra: Callable[[str, list], None] | None = kwargs.get("log_extra")
    for key, value in metrics.items():
        if log_metric is not None and value == value:
            log_metric(f"{name}/{key}", float(value))
    for key, values in extra.items():
        if log_extra is not None and values:  # the feedback always; which judge decided and why none did, where any
            log_extra(f"{name}_{key}", values)


class PrometheusReward:
    """Judge-based reward for TRL (sync): ``judge`` a PrometheusJudge, or its ``JudgeSpec`` or a dict of its options
    (built lazily from options and dropped when pickled: TRL's async GRPO runs rewards in a child process; a ready
    in-process vLLM judge cannot travel and refuses to pickle with the fix); ``config`` a ``RewardConfig``, or its
    fields as keywords.

    >>> import pickle
    >>> r = PrometheusReward({"backend": "scripted", "outputs": ["[RESULT] 4"]})
    >>> r.judge.grade(["q"], ["r"], "helpfulness")[0].score
    4.0
    >>> pickle.loads(pickle.dumps(r))._judge is None
    True
    """

    def __init__(self, judge: Any, config: RewardConfig | None = None, **options: Any) -> None:
        self.config = reward_config(config, options, type(self).__name__)
        self._building = threading.Lock()  # concurrent first calls build one judge (one engine, one session)
        self._resolved = False  # whether its server's model and context length were asked (once per run)
        if isinstance(judge, (dict, JudgeSpec)):
            self._judge_spec: JudgeSpec | None = JudgeSpec.of(judge) if isinstance(judge, dict) else judge
            self._judge: Judge | None = None
        elif isinstance(judge, Judge):
            self._judge_spec, self._judge = None, judge
        else:
            raise ConfigError(
                "expected a PrometheusJudge, a JudgeSpec or a dict of its options "
                f"(e.g. {{'model': 'prometheus-7b-v2.0'}}), got {type(judge).__name__}",
                "judge",
            )
        # the judge's format, checked to give the config's rewards (its mode's task, expected scores): the config's
        # ``format`` is given to a judge built from options (None: the options' own); a judge passed in must be in it
        cfg, want, spec = self.config, self.config.format, self._judge_spec
        if spec is not None and want is not None and spec.format is None:
            spec = self._judge_spec = dataclasses.replace(spec, format=want)
        if spec is None:
            fmt = self.judge.format
        else:
            fmt = get_judge_format_setting(spec.format) if isinstance(spec.format, str) else spec.judge_format
        if want is not None and get_judge_format_setting(want).name != fmt.name:
            judge = "the judge is in" if spec is None else "the judge options name"
            raise ConfigError(f"the config names {want!r} but {judge} {fmt.name!r}; fix: give one of them", "format")
        task: Task = "absolute" if cfg.mode == "absolute" else "relative"
        if task not in fmt.tasks:
            raise ConfigError(f"mode {cfg.mode!r} needs {task} judgments: {unsupported_task(fmt, task)}", "format")
        if cfg.mode == "absolute" and cfg.score == "expected" and fmt.force_prefix is None:
            raise ConfigError(
                f"score='expected' reads verdict-token probabilities, but judge format {fmt.name!r} has no "
                "one-token verdict after a fixed prefix; fix: score='sample' or 'mean', or another format",
                "format",
            )
        if want is None and fmt.name != DEFAULT_FORMAT and fmt.name in JUDGE_FORMATS:
            # the judge's (registered) format named in the config: its scale is the rewards' and failure_reward's
            self.config = dataclasses.replace(cfg, format=fmt.name)
        self.__name__ = self.config.name
        self.last_metrics: dict[str, float] = {}
        self.health = JudgeHealth()  # whether the judge is answering (what ``/health`` reports)
        self.canary = CanaryGate(judge)  # the configuration canary, run before the first batch
        try:  # a sample's rubric that does not fit the format fails that sample alone (the judge's item check)
            self._resolver = RubricResolver(self.config.rubric, what="sample")
        except InputError as e:
            raise ConfigError(str(e.__cause__ or e), "rubric") from e  # what get_rubric said
        problem = fmt.rubric_problem(self._resolver.default, task) if self._resolver.default else None
        if problem is not None:
            raise ConfigError(problem, "rubric")
        self._canary_rubric = canary_rubric(fmt, task, self._resolver.default)

    def judge_server(self) -> JudgeServer | None:
        """The judge server its judge asks (URLs, model, API key: as its options give them, or its built backend
        holds them; the judge is not built for this); None for an in-process or scripted judge."""
        if self._judge_spec is not None and self._judge is None:
            return self._judge_spec.judge_server
        backend = self.judge.backend if isinstance(self.judge, PrometheusJudge) else None
        if isinstance(backend, CachedBackend) and backend.built:
            backend = backend.inner
        return backend.server if isinstance(backend, OpenAIServer) else None

    def served(self, model: str | None, max_model_len: int | None) -> None:
        """Give a judge not built yet the model its server serves and that model's context length, as one
        ``GET /models`` read them (the start-up check's, or ``aresolve``'s): the judge then asks neither."""
        with self._building:
            spec, self._resolved = self._judge_spec, True
            if spec is not None and self._judge is None:
                model, context = spec.model or model, spec.max_model_len or max_model_len
                self._judge_spec = dataclasses.replace(spec, model=model, max_model_len=context)

    async def aresolve(self) -> None:
        """Ask a judge server not asked yet for its model and context length (``JudgeSpec.aresolve``, once)."""
        spec = self._judge_spec
        if spec is not None and spec.server and self._judge is None and not self._resolved:
            resolved = await spec.aresolve()
            self.served(resolved.model, resolved.max_model_len)

    @property
    def judge(self) -> Judge:
        """The judge (built on first use when configured as a dict)."""
        if self._judge is None:
            with self._building:
                if self._judge is None:
                    self._judge = self._build()
        return self._judge

    def _build(self) -> Judge:
        """The judge of the options (``judge`` holds ``_building``); an in-process vLLM engine is refused in TRL's
        rollout child, which runs with ``CUDA_VISIBLE_DEVICES=""``."""
        spec = self._judge_spec or JudgeSpec()
        if spec.kwargs()["backend"] == "vllm" and multiprocessing.current_process().name == TRL_ROLLOUT_CHILD:
            raise ConfigError(
                f"judge: an in-process vLLM engine (backend='vllm', model={spec.model!r}) was asked for in TRL's "
                f"CUDA-free rollout worker child ({TRL_ROLLOUT_CHILD!r}); fix: serve the judge (prom-reward serve "
                "--model ...) and give its URL: judge={'backend': 'openai', 'base_url': 'http://HOST:PORT/v1', "
                "'model': ...}"
            )
        try:
            return spec.build()
        except TypeError as e:  # an option the judge or its backend does not take, or one it needs missing
            raise ConfigError(
                f"judge options {sorted(spec.kwargs())}: {e}; fix: give PrometheusJudge's options and "
                "its backend's (e.g. {'backend': 'openai', 'base_url': 'http://judge:8000/v1'})"
            ) from e

    def close(self) -> None:
        """Release a judge this reward built from a dict (a judge passed in stays the caller's)."""
        if self._judge_spec is not None and self._judge is not None:
            self._judge.close()
            self._judge = None

    def __getstate__(self) -> dict[str, Any]:
        """A judge built from options is dropped (each process builds its own); one passed in travels (a judge
        holding an in-process vLLM engine refuses: ``PrometheusJudge.__getstate__``)."""
        state = dict(self.__dict__)
        state.pop("_building", None)  # a lock does not pickle: each process has its own
        if self._judge_spec is not None:
            state["_judge"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._building = threading.Lock()

    def resolve(self, samples: Sequence[RewardSample]) -> tuple[list[RewardSample | None], list[str | None], list[int]]:
        """Each sample in its judge-ready form (text fields, a ``Rubric``, the defaults filled in, template
        markers and special tokens neutralised), or None with the reason it cannot be judged; and how many
        markers were neutralised per sample."""
        cfg, judge = self.config, self.judge
        declared = judge.capabilities
        guard, special, markers = declared.neutralize_markers, declared.special_tokens, judge.format.markers
        resolved: list[RewardSample | None] = [None] * len(samples)
        reasons: list[str | None] = [None] * len(samples)
        marks = [0] * len(samples)
        for i, s in enumerate(samples):
            try:
                fields = {
                    "response": completion_text(s.response, i),
                    "instruction": s.instruction if s.instruction is not None else prompt_text(s.prompt, i),
                    "reference_answer": s.reference_answer if s.reference_answer is not None else cfg.reference_answer,
                    "baseline": completion_text(s.baseline, i) if s.baseline is not None else None,
                }
                if cfg.mode == "pairwise_reference" and fields["baseline"] is None:
                    raise InputError(
                        f"pairwise_reference needs a baseline response (column {cfg.baseline_column!r}), got None",
                        index=i,
                        field=cfg.baseline_column,
                    )
                count = 0
                for name, value in fields.items():
                    if value is not None and not isinstance(value, str):
                        raise InputError(f"{name}: expected a string, got {type(value).__name__}", index=i, field=name)
                    if value is not None:
                        check_text(value, i, name)
                        if guard:  # template markers and special tokens neutralised
                            fields[name], k = neutralize(value, special, markers)
                            count += k
                rubric = self._resolver(s.rubric, index=i, field=cfg.rubric_column)
                checklist = None if s.checklist is None else parse_checklist(s.checklist)
                resolved[i], marks[i] = dataclasses.replace(s, rubric=rubric, checklist=checklist, **fields), count
            except InputError as e:
                reasons[i] = input_failure(e).reason
        return resolved, reasons, marks

    checklist_modes: tuple[str, ...] = CHECKLIST_MODES  # the modes that judge a sample's checklist

    async def ajudge_batch(
        self, samples: Sequence[RewardSample], *, deadline: float | None = None, sampling: SamplingOverrides = None
    ) -> ModeOutput:
        """Rewards with their feedback, failure reasons (``reasons[i]`` where ``rewards[i]`` is None) and metrics;
        ``deadline`` (monotonic) bounds the outage retries, ``sampling`` overrides the judge's (sync: ``judge_batch``).

        >>> from prom_reward import PrometheusJudge
        >>> r = PrometheusReward(PrometheusJudge(backend="scripted", outputs=["Fine. [RESULT] 4"]))
        >>> out = r.judge_batch([RewardSample("Say hi.", "hi"), RewardSample("Say hi.", "bad \\ud800")])
        >>> out.rewards, out.feedback[0], out.reasons[1][:30], out.metrics["failed_samples"]
        ([4.0, None], 'Fine.', 'response holds a lone surrogat', 1.0)
        """
        n = len(samples)
        if not n:
            return ModeOutput([], [], {}, [], [])
        cfg, modes = self.config, self.checklist_modes
        if cfg.mode not in modes and any(s.checklist is not None for s in samples):  # before the canary: none judged
            raise ConfigError(
                f"column {cfg.checklist_column!r}: a checklist is judged per criterion in mode "
                f"{' or '.join(map(repr, modes))}, not {cfg.mode!r}; fix: mode='absolute', or drop the column"
            )
        if self.canary.due:
            await self.acheck_configuration(deadline)
        if cfg.mode == "pairwise_reference" and all(x.baseline is None for x in samples):
            raise InputError(
                f"pairwise_reference needs a baseline response per sample (dataset column "
                f"{cfg.baseline_column!r}) and none has one; add that column or set baseline_column=",
                field=cfg.baseline_column,
            )
        resolved, reasons, marks = self.resolve(samples)
        grouped = cfg.mode == "pairwise_group"  # a prompt's completions are judged (and retried) together
        units: dict[Hashable, list[int]] = {}
        for i, sample in enumerate(resolved):
            if sample is not None:
                units.setdefault(sample.group if grouped else i, []).append(i)
        run = batch_runner(self.judge, cfg, resolved, sampling)
        iso = await ajudge_until_answered(
            list(units.values()), run, ModeOutput.item_errors, cfg.outage, deadline=deadline, health=self.health
        )
        out = assemble(n, iso.parts)
        errors, why = out.errors or [None] * n, list(reasons)
        # a judged sample's reason: the judge's (an order that failed, a transport failure ...), else the plain one
        for i in {i for idx, _ in iso.parts for i in idx}:
            error = errors[i]
            why[i] = None if out.rewards[i] is not None else error.reason if error is not None else _NO_VERDICT
        why = [iso.outage.get(i, w) for i, w in enumerate(why)]
        alone = sum(e is not None and e.kind == "input" for e in errors)  # failed on their input (the judge's outcome)
        out.metrics["abstain_rate"] = sum(r is None for r in out.rewards) / n
        out.metrics["failed_samples"] = float(sum(r is not None for r in reasons) + alone)
        out.metrics["outage_failures"] = float(len(iso.outage))
        out.metrics["judge_calls"] = float(iso.calls)
        out.reasons = why if any(w is not None for w in why) else []
        responses = [response_text(s.response) for s in samples]  # length control and drift, as the policy wrote
        keys = [s.group for s in samples]
        out.rewards, length_metrics = control_length(out.rewards, responses, keys, cfg)
        out.metrics.update(length_metrics)
        top, markers = top_of_scale(cfg), self.judge.format.markers
        out.metrics.update(diagnostics(out.rewards, responses, keys, out.feedback, top=top, markers=markers))
        out.metrics["markers_neutralized"] = float(sum(marks))
        out.neutralized = marks if any(marks) else []
        self.last_metrics = out.metrics
        return out

    judge_batch = sync_method(ajudge_batch)

    async def acheck_configuration(self, deadline: float | None = None) -> str | None:
        """Run the configuration canary if due (its judge server's model asked first, once); returns why the judge
        did not answer, else None."""
        await self.aresolve()
        judgment = functools.partial(judge_canary, self.judge, self.config, self._canary_rubric, deadline, self.health)
        return await self.canary.run(judgment)

    async def acompute(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """Rewards for a batch, None where a completion could not be judged (counted); logs through TRL's callbacks
        when given. A judge down past the outage budget raises ``JudgeUnavailableError`` by default."""
        cfg = self.config
        if not len(prompts) and not len(completions):  # an empty batch; lengths that disagree are an InputError
            return []
        columns = {name: kwargs.get(getattr(cfg, setting)) for name, setting in SAMPLE_COLUMNS.items()}
        samples = samples_from_columns(prompts, completions, columns)
        out = await self.ajudge_batch(samples)
        texts = {"feedback": out.feedback, "judge": out.judges, "failure_reason": out.reasons}
        extra = {k: [t or "" for t in v] for k, v in texts.items()} | {"markers_neutralized": out.neutralized}
        log_to_trl(cfg.name, kwargs, out.metrics, extra if cfg.log_feedback else {})
        return out.rewards

    compute = sync_method(acompute)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """TRL's reward function: ``compute`` (the other dataset columns come as ``kwargs``)."""
        return self.compute(prompts, completions, completion_ids, **kwargs)


class AsyncPrometheusReward(PrometheusReward):
    """The same reward with ``async def __call__``: TRL awaits it alongside other async rewards."""

    async def __call__(  # type: ignore[override]
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """TRL's async reward function: ``acompute``, awaited on the caller's loop."""
        return await self.acompute(prompts, completions, completion_ids, **kwargs)
