"""Where the judge's generations come from: the backend protocol, the in-process engines (vLLM, transformers),
OpenAI-compatible servers, a scripted backend for tests, and the judgment store."""

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
