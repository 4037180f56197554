"""The backend registry: backends by name, built from their options.

Names: ``vllm`` (in-process ``vllm.LLM``, the default), ``openai`` (one or more
OpenAI-compatible servers), ``transformers`` (plain ``model.generate``), ``scripted``
(replays given outputs; for tests of judge logic). Each is imported on first use, so
vLLM is only imported when the ``vllm`` backend is built.

Example:
    >>> BACKENDS.names()
    ['openai', 'scripted', 'transformers', 'vllm']
"""

from __future__ import annotations

import importlib
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


def backend_class(name: str) -> type:
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
    return backend_class(backend)(**options)
