"""Where the judge's generations come from: the backend protocol and its sampling options, the
in-process vLLM engine, OpenAI-compatible servers (and launching vLLM ones), transformers, a
scripted backend for tests, and the judgment store that caches any of them.

Example:
    >>> from prom_reward.backends import BACKENDS
    >>> BACKENDS.names()
    ['openai', 'scripted', 'transformers', 'vllm']
"""

from prom_reward.backends.base import (
    Backend,
    BackendCapabilities,
    Completion,
    GenerationRequest,
    GenerationResult,
    TokenLogprobs,
)
from prom_reward.backends.bridge import run_sync, sync_method
from prom_reward.backends.cached import CachedBackend
from prom_reward.backends.factory import BACKENDS, backend_class, make_backend
from prom_reward.backends.sampling import SamplingConfig

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendCapabilities",
    "CachedBackend",
    "Completion",
    "GenerationRequest",
    "GenerationResult",
    "SamplingConfig",
    "TokenLogprobs",
    "backend_class",
    "make_backend",
    "run_sync",
    "sync_method",
]
