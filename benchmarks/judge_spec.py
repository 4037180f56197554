"""The ``JudgeSpec`` (and ``PrometheusJudge``) of the benchmarks' ``--judge`` spec.

The spec is one of:

- a preset name (``smollm2-135m-instruct``, ``prometheus-7b-v2.0`` ...) or hub id;
- a local model folder (a merged fine-tune such as a pocket judge);
- a ``.yaml``/``.yml``/``.json`` file holding ``PrometheusJudge`` keyword arguments
  (``model``, ``backend``, ``preset``, ``sampling``, ``force_verdict``, engine options ...).

With ``server`` (an OpenAI-compatible base URL) the judge talks to that server instead of
starting an engine. Explicit ``overrides`` (from CLI flags) win over the file.

Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "judge.json")
    >>> _ = open(path, "w").write(json.dumps({"backend": "scripted", "outputs": ["Ok. [RESULT] 3"]}))
    >>> judge_options(path).backend
    'scripted'
    >>> build_judge(path).grade(["q"], ["r"], "helpfulness")[0].score
    3.0
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from prom_reward.core.judge import PrometheusJudge
from prom_reward.core.judge_spec import JudgeSpec
from prom_reward.errors import ConfigError

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def judge_options(
    spec: str, *, server: str | None = None, seed: int = 0, overrides: dict[str, Any] | None = None
) -> JudgeSpec:
    """The ``JudgeSpec`` that ``spec`` stands for."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"--judge: expected a preset name, model folder or judge config file, got {spec!r}")
    path = Path(spec)
    if path.suffix.lower() in CONFIG_SUFFIXES:
        if not path.is_file():
            raise ConfigError(
                f"--judge {spec}: config file not found; pass an existing .yaml/.json file of "
                "PrometheusJudge options, a preset name or a model folder"
            )
        text = path.read_text(encoding="utf-8")
        opts = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
        if not isinstance(opts, dict):
            raise ConfigError(
                f"--judge {spec}: expected a mapping of PrometheusJudge options, got {type(opts).__name__}"
            )
    else:
        opts = {"model": spec}
    if server:
        opts.update(backend="openai", base_url=server)
    opts.setdefault("backend", "vllm")
    if opts["backend"] == "vllm":
        from prom_reward.backends.vllm_engine import _is_cpu_platform

        opts.setdefault("seed", seed)
        if _is_cpu_platform():
            opts.setdefault("enforce_eager", True)  # saves ~85 s of compiling on CPU
            opts.setdefault("max_model_len", 4096)
    for k, v in (overrides or {}).items():
        if k == "sampling" and isinstance(opts.get("sampling"), dict):
            opts["sampling"] = {**opts["sampling"], **v}
        else:
            opts[k] = v
    return JudgeSpec.of(opts)


def build_judge(spec: str, **kwargs: Any) -> PrometheusJudge:
    """The ``PrometheusJudge`` of ``judge_options(spec, ...)``."""
    return judge_options(spec, **kwargs).build()


def judge_label(spec: str) -> str:
    """A short file-name-safe name for a judge spec (``smollm2-135m-instruct``, ``judge.yaml`` -> ``judge``)."""
    p = Path(spec)
    name = p.stem if p.suffix.lower() in CONFIG_SUFFIXES else (p.name or spec)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "judge"
