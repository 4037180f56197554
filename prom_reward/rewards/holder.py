"""``JudgeHolder``: a reward's judge, built lazily from options and dropped when pickled (TRL's async GRPO runs
rewards in a child process); a ready in-process vLLM judge cannot travel and refuses to pickle with the fix.

Example:
    >>> import pickle
    >>> h = JudgeHolder({"backend": "scripted", "outputs": ["[RESULT] 4"]})
    >>> h.judge.grade(["q"], ["r"], "helpfulness")[0].score
    4.0
    >>> pickle.loads(pickle.dumps(h))._judge is None
    True
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
from typing import Any

from prom_reward.backends.base import JudgeServer
from prom_reward.backends.cached import CachedBackend
from prom_reward.backends.openai_server import OpenAIServer
from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.core.protocol import Judge
from prom_reward.errors import ConfigError
from prom_reward.format.judge_format import JudgeFormat, Task, unsupported_task
from prom_reward.rewards.config import RewardConfig, get_judge_format_setting

TRL_ROLLOUT_CHILD = "grpo-rollout-worker-child"
"""The process name TRL 1.16's ``AsyncRolloutWorker`` gives its spawned child (run with ``CUDA_VISIBLE_DEVICES=""``)."""


class JudgeHolder:
    """Base class holding ``judge`` (a PrometheusJudge, or its ``JudgeSpec``: given, or of a dict of its options)."""

    def __init__(self, judge: Judge | JudgeSpec | dict[str, Any]) -> None:
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

    def match_format(self, config: RewardConfig) -> JudgeFormat:
        """The judge's format, checked to give ``config``'s rewards (its mode's task, expected scores): its
        ``format`` is given to a judge built from options (None: the options' own); a judge passed in must be in it."""
        want, spec = config.format, self._judge_spec
        if spec is not None and want is not None and spec.format is None:
            spec = self._judge_spec = dataclasses.replace(spec, format=want)
        if spec is None:
            fmt = self.judge.format
        else:
            fmt = get_judge_format_setting(spec.format) if isinstance(spec.format, str) else spec.judge_format
        if want is not None and get_judge_format_setting(want).name != fmt.name:
            judge = "the judge is in" if spec is None else "the judge options name"
            raise ConfigError(f"the config names {want!r} but {judge} {fmt.name!r}; fix: give one of them", "format")
        task: Task = "absolute" if config.mode == "absolute" else "relative"
        if task not in fmt.tasks:
            raise ConfigError(f"mode {config.mode!r} needs {task} judgments: {unsupported_task(fmt, task)}", "format")
        if config.mode == "absolute" and config.score == "expected" and fmt.force_prefix is None:
            raise ConfigError(
                f"score='expected' reads verdict-token probabilities, but judge format {fmt.name!r} has no "
                "one-token verdict after a fixed prefix; fix: score='sample' or 'mean', or another format",
                "format",
            )
        return fmt

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
        """Release a judge this holder built from a dict (a judge passed in stays the caller's)."""
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
