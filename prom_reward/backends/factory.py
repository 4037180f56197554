"""The backend registry: backends by name (``vllm``, ``openai``, ``transformers``, ``scripted``), imported on use.

Example:
    >>> BACKENDS.names()
    ['openai', 'scripted', 'transformers', 'vllm']
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from prom_reward.backends.base import Backend
from prom_reward.errors import ConfigError
from prom_reward.registry import Registry

# name -> "module:Class", imported lazily so that e.g. vLLM is only imported when used.
BACKENDS: Registry[str] = Registry("backend")
BACKENDS.register("vllm", "prom_reward.backends.vllm_engine:VLLMEngine")
BACKENDS.register("openai", "prom_reward.backends.openai_server:OpenAIServer")
BACKENDS.register("transformers", "prom_reward.backends.transformers_backend:TransformersBackend")
BACKENDS.register("scripted", "prom_reward.backends.scripted:ScriptedBackend")


def backend_class(name: str) -> type[Backend]:
    """The backend class registered as ``name`` (imports its module on first use)."""
    module, _, cls = BACKENDS.get(name).partition(":")
    return getattr(importlib.import_module(module), cls)


def make_backend(backend: str | Backend, **options: Any) -> Backend:
    """Build a backend from its name and options, or return a Backend object unchanged.

    Example:
        >>> make_backend("scripted", outputs=["Good. [RESULT] 4"]).name
        'scripted'
    """
    if not isinstance(backend, str):
        if options:
            raise ConfigError(
                f"backend options {sorted(options)} were given with a ready backend object "
                f"({type(backend).__name__}); pass options to its constructor instead"
            )
        return backend
    if backend in IN_PROCESS:
        check_model_folder(options.get("model"))
    return backend_class(backend)(**options)


IN_PROCESS = ("vllm", "transformers")  # backends that load the weights themselves


def check_model_folder(model: Any) -> None:
    """Raise ConfigError before an engine starts unless an in-process ``model`` is a hub id (``org/name``), an
    existing folder, or a bare name found as a folder or in the local Hugging Face cache (a mistyped preset).

    Example:
        >>> check_model_folder("prometheus-eval/prometheus-7b-v2.0")
        >>> check_model_folder("/no/such/judge")
        Traceback (most recent call last):
        ...
        prom_reward.errors.ConfigError: model: no such folder '/no/such/judge'; fix: ...
    """
    if not isinstance(model, str):
        return
    looks_like_path = model.startswith(("/", ".", "~")) or model.count("/") > 1  # a hub id is org/name
    if looks_like_path and not os.path.isdir(os.path.expanduser(model)):
        raise ConfigError(
            f"no such folder {model!r}; fix: give the folder of a model (config.json and weights) "
            "or a hub id such as prometheus-eval/prometheus-7b-v2.0",
            "model",
        )
    if "/" not in model and not os.path.isdir(model) and not _cached(model):  # a typo of a preset, most often
        raise ConfigError(
            f"{model!r} is not a preset, a folder or a downloaded model; fix: give a preset name (e.g. "
            "prometheus-7b-v2.0, pocket-judge), the folder of a model, or a hub id as org/name such as "
            "prometheus-eval/prometheus-7b-v2.0",
            "model",
        )


def _cached(model: str) -> bool:
    """Whether the hub id ``model`` has a ``config.json`` in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - the in-process backends depend on it
        return True
    return isinstance(try_to_load_from_cache(model, "config.json"), str)
