"""Presets: the known judge models (model id, judge format, wire format, engine options, sampling defaults),
merged under the user's options key by key; docs/formats.md lists them, and the formats (``formats_table``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import prom_reward.format.formats  # noqa: F401  (registers the built-in formats, for formats_table)
from prom_reward.format.judge_format import DEFAULT_FORMAT, JUDGE_FORMATS, JudgeFormat, get_judge_format
from prom_reward.registry import Registry


@dataclass(frozen=True)
class JudgePreset:
    """A named judge configuration."""

    name: str
    model: str
    """Hub id, or ``local:smollm2`` / ``local:pocket-judge`` for the folders made by ``make setup``."""
    wire: str = "chat"
    engine: dict[str, Any] = field(default_factory=dict)
    """Backend/engine options (merged under the user's)."""
    judge: dict[str, Any] = field(default_factory=dict)
    """PrometheusJudge options (sampling, force_verdict, ...), merged under the user's."""
    format: str = "prometheus2"
    """The judge format its model was trained on, unless the user names one."""


PRESETS: Registry[JudgePreset] = Registry("judge preset")
_RM_R1 = ("7B", "14B", "32B")
_PROMETHEUS2_ENGINE = {"dtype": "bfloat16", "max_model_len": 8192}
for _p in (
    *(
        JudgePreset(name, f"prometheus-eval/{model}", wire, _PROMETHEUS2_ENGINE)
        for name, model, wire in (
            ("prometheus-7b-v2.0", "prometheus-7b-v2.0", "chat"),
            ("prometheus-8x7b-v2.0", "prometheus-8x7b-v2.0", "chat"),
            ("prometheus-7b-v2.0-inst", "prometheus-7b-v2.0", "inst"),
        )
    ),
    JudgePreset(
        "smollm2-135m-instruct",
        "local:smollm2",
        "chat",
        {"max_model_len": 8192},
        {"force_verdict": "always", "sampling": {"max_tokens": 128}},
    ),
    JudgePreset(
        "pocket-judge", "local:pocket-judge", "chat", {"max_model_len": 8192}, {"sampling": {"max_tokens": 512}}
    ),
    *(
        JudgePreset(
            f"m-prometheus-{size.lower()}",
            f"Unbabel/M-Prometheus-{size}",
            "chat",
            {"dtype": "bfloat16"},
            format="m-prometheus",
        )
        for size in ("3B", "7B", "14B")
    ),
    *(
        JudgePreset(name, model, "chat", {"dtype": "bfloat16"}, format=fmt)
        for name, model, fmt in (
            ("flow-judge-v0.1", "flowaicom/Flow-Judge-v0.1", "flow-judge"),
            ("selene-1-mini", "AtlaAI/Selene-1-Mini-Llama-3.1-8B", "selene"),
            ("offsetbias-8b", "NCSOFT/Llama-3-OffsetBias-8B", "offsetbias"),
            ("skywork-critic-8b", "Skywork/Skywork-Critic-Llama-3.1-8B", "mt-bench-pairwise"),
            ("skywork-critic-70b", "Skywork/Skywork-Critic-Llama-3.1-70B", "mt-bench-pairwise"),
            ("rise-judge-7b", "R-I-S-E/RISE-Judge-Qwen2.5-7B", "rise-judge"),
            ("rise-judge-32b", "R-I-S-E/RISE-Judge-Qwen2.5-32B", "rise-judge"),
            ("con-j-7b", "ZiyiYe/Con-J-Qwen2-7B", "con-j"),
            *((f"rm-r1-instruct-{n.lower()}", f"gaotang/RM-R1-Qwen2.5-Instruct-{n}", "rm-r1") for n in _RM_R1),
            *(
                (f"rm-r1-distilled-{n.lower()}", f"gaotang/RM-R1-DeepSeek-Distilled-Qwen-{n}", "rm-r1-reasoning")
                for n in _RM_R1
            ),
        )
    ),
):
    PRESETS.register(_p.name, _p)


def get_preset(name: str) -> JudgePreset:
    """The preset called ``name``; unknown names list the valid ones."""
    return PRESETS.get(name)


def find_preset_for_model(model: str | None) -> JudgePreset | None:
    """The preset whose name or model id equals ``model`` (first match), else None."""
    if not model:
        return None
    if model in PRESETS:
        return PRESETS.get(model)
    return next((PRESETS.get(name) for name in PRESETS if PRESETS.get(name).model == model), None)


def default_format(model: str | None, preset: str | None = None) -> str:
    """The judge format of a judge whose user names none: its preset's, else ``prometheus2``."""
    p = get_preset(preset) if preset else find_preset_for_model(model)
    return p.format if p else "prometheus2"


def resolve_model_path(model: str) -> str:
    """Turn ``local:smollm2`` / ``local:pocket-judge`` into their folders (built on first use)."""
    if model == "local:smollm2":
        from prom_reward.local.models import ensure_smollm2

        return str(ensure_smollm2())
    if model == "local:pocket-judge":
        from prom_reward.local.models import ensure_pocket_judge

        return str(ensure_pocket_judge())
    return model


def apply_preset(
    p: JudgePreset, backend: str, model: str | None, options: dict[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    """Merge a preset under the user's options, as far as the chosen backend can use it."""
    if backend == "scripted":  # replays outputs: no weights, no wire; the preset's judge options still apply
        return model, options
    if backend == "openai":
        # The server owns the weights and engine options; the client needs the wire format,
        # and the literal [INST] string can only travel through the completions endpoint.
        wire = {"wire": p.wire, **({"endpoint": "completions"} if p.wire == "inst" else {})}
        served = None if p.model.startswith("local:") else p.model
        return (model if model != p.name else served), {**wire, **options}
    engine = {"wire": p.wire, **(p.engine if backend == "vllm" else {})}
    return resolve_model_path(p.model), {**engine, **options}


HEADER = "| name | preset models | tasks | scale | verdicts | forced after |\n|---|---|---|---|---|---|"


def _models(name: str) -> str:
    """The model ids of the presets in format ``name``, each once."""
    models = dict.fromkeys(PRESETS.get(p).model for p in PRESETS if PRESETS.get(p).format == name)
    return ", ".join(f"`{m}`" for m in models) or "none (name it: `--format`)"


def _span(values: list[str]) -> str:
    """``values`` (a scale, verdict labels) as a range when more than two, else listed."""
    return f"{values[0]}..{values[-1]}" if len(values) > 2 else ", ".join(values)


def _labels(fmt: JudgeFormat) -> str:
    """The verdict labels of each task the format judges (absolute first)."""
    return "; ".join(_span([f"`{label}`" for label in fmt.verdict_labels(task)]) for task in sorted(fmt.tasks))


def formats_table() -> str:
    """The markdown table of the built-in judge formats."""
    names = sorted(JUDGE_FORMATS, key=lambda n: (n != DEFAULT_FORMAT, n))
    rows = []
    for name in names:
        fmt = get_judge_format(name)
        shown = f"`{name}` (default)" if name == DEFAULT_FORMAT else f"`{name}`"
        forced = "not one token: never forced" if fmt.force_prefix is None else f'`"{fmt.force_prefix}"`'
        scale = _span([str(v) for v in fmt.scale]) or "none"
        cells = [shown, _models(name), ", ".join(sorted(fmt.tasks)), scale, _labels(fmt), forced]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([HEADER, *rows])
